package regional

import "maps"

// Route says which replica serves a method of oauth.Store.
type Route int

const (
	// Home: the replica of the home the context names (oauth.WithHome), the local one when it
	// names none or this region's. Every write that decides who wins a single use, for a code,
	// a refresh token or what comes with them, is Home, so one replica serializes it.
	Home Route = iota + 1
	// Local: this region's replica, whatever the context names. Each Local route says why.
	Local
)

func (r Route) String() string {
	switch r {
	case Home:
		return "home"
	case Local:
		return "local"
	}
	return "unrouted"
}

// Routing is one method's route and the reason for it.
type Routing struct {
	Route  Route
	Reason string
}

// routes is the one place that decides, for every method of oauth.Store, which replica serves
// it. A method oauth.Store gains is refused (Store.replica) until it is listed here, and
// TestRegional_EveryStoreMethodIsRoutedOrExemptWithAReason fails until it is: a Local one needs
// a reason, a Home one a test that proves it reaches the home's replica. docs/multiregion.md
// lists this table.
var routes = map[string]Routing{
	// GrantStore.
	"CreateCode":   {Local, "a code is created by the region that issues it, which is its home"},
	"ConsumeCode":  {Home, "a code is consumed once: the consume is decided by its home's replica"},
	"IssueTokens":  {Home, "the issuance after a consume, and a refresh's spend, are decided at the code's or token's home"},
	"GetToken":     {Home, "read locally first (an API call's token check); a token not replicated yet is read at its home"},
	"RevokeToken":  {Home, "a delete where the token was written, so replication cannot bring it back"},
	"RevokeGrant":  {Home, "a replay's revocation, and its tombstone, where the racing issuance is decided"},
	"ConsumeGrant": {Home, "a payment grant is used once at the bank API: decided by its token's home's replica"},
	"GetGrant":     {Home, "a replay reads the grant it revokes where that grant is written"},
	"ListGrants":   {Local, "operators' listing, on no request path; replicas converge within the replication delay"},

	// ClientStore: operators' writes (authctl), one at a time from one region.
	"GetClient":    {Local, "clients are read from the replicated registry"},
	"CreateClient": {Local, "an operator's write; replicated to the other region"},
	"UpdateClient": {Local, "an operator's compare-and-swap, run from one region at a time"},
	"DeleteClient": {Local, "an operator's write; replicated to the other region"},
	"ListClients":  {Local, "operators' listing"},

	// UserStore: users are written by operators and by the sign-in of the region the browser reached.
	"GetUser":           {Local, "users are read from the replicated table"},
	"GetUserByUsername": {Local, "users are read from the replicated table"},
	"CreateUser":        {Local, "an operator's write (authctl), made from one region; replicated to the other"},
	"UpdateUser":        {Local, "a user's record is changed by the region the browser reached; replicated"},
	"DeleteUser":        {Local, "an operator's write; replicated to the other region"},
	"ListUsers":         {Local, "operators' listing"},

	// InteractionStore: the pages' state.
	"PutAuthRequest":  {Local, "pages' state, and a pushed request: written by the region the client or browser reached, which is its home"},
	"GetAuthRequest":  {Home, "a pushed request is read at the region it was pushed to; a page's pending request names no home and is local"},
	"TakeAuthRequest": {Home, "a pushed request_uri is used once: taken at the region it was pushed to; a page's pending request names no home and is local"},
	"PutSession":      {Local, "pages' state: read and written by the region the browser reached"},
	"GetSession":      {Local, "pages' state: read and written by the region the browser reached"},
	"DeleteSession":   {Local, "pages' state: read and written by the region the browser reached"},
	"TakeSession":     {Local, "pages' state: a logout ends the session in the region the browser reached, as DeleteSession"},
	"CountFailure":    {Local, "login counters are per region: two regions can each let a username's limit through within the replication delay"},
	"Failures":        {Local, "login counters are per region"},
	"ResetFailures":   {Local, "login counters are per region"},

	// KeyStore.
	"Keys":       {Local, "the key registry is read from the replicated table"},
	"UpdateKeys": {Local, "one writer: only the primary region rotates keys (AUTH_KEY_ROTATION=off elsewhere)"},

	// NonceKeyStore.
	"NonceKeys":       {Local, "the DPoP nonce keys are read from the replicated table, so both regions accept each other's nonces"},
	"UpdateNonceKeys": {Local, "one writer: only the primary region's rotation makes nonce keys (AUTH_KEY_ROTATION=off elsewhere)"},

	// PairwiseSaltStore.
	"PairwiseSalt": {Local, "read from the replicated table; stored once, on first use, where that use happens (two regions' first uses within the replication delay could store two salts: the last replicated write wins)"},

	// ReplayStore.
	"UseOnce": {Home, "a DPoP proof's or client assertion's jti is recorded at the home the context names, that of the code or token the request carries; with none (a PAR request, a resource request whose token has no home label) it is local"},

	// FactorStore.
	"Factors":       {Local, "a sign-in reads the user's factors in the region the browser reached"},
	"UpdateFactors": {Local, "a second factor's use is a compare-and-swap in the region the browser reached (its pending request is there); the other region sees it after replication"},

	// RegistrationStore.
	"PutInitialAccessToken":  {Local, "an operator's write (authctl), made in the region the token's home label names"},
	"GetInitialAccessToken":  {Home, "read where it will be taken, so a token just stored in the other region is found"},
	"TakeInitialAccessToken": {Home, "an initial access token is used once: taken at the home its label names, whichever region the registration reached"},

	// BackchannelStore (CIBA): a request lives at the home its ID names (bc_<home>.<hash>, the
	// auth_req_id's), and every call on one ID is served there, whichever region it reached.
	"PutBackchannelRequest":     {Home, "a CIBA request is stored at the home its ID names, the region of the backchannel authentication endpoint that issued its auth_req_id"},
	"GetBackchannelRequest":     {Home, "a CIBA request is read at the home its ID names, where its decision and polls are written"},
	"PollBackchannelRequest":    {Home, "a poll's slow_down is a compare-and-swap of NextPollAt: decided at the home its ID names"},
	"DecideBackchannelRequest":  {Home, "a CIBA request is decided once: at the home its ID names, whichever region the device's answer reached"},
	"ConsumeBackchannelRequest": {Home, "an approved CIBA request is issued once, with the poll's one-time values: at the home its ID names"},
	"ListBackchannelRequests":   {Local, "the bank app page's listing of a customer's pending requests, read from the replicated table; each decision is then made at its request's home"},
}

// Routes returns a copy of the routing table, for documentation and tests.
func Routes() map[string]Routing { return maps.Clone(routes) }
