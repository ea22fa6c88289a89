package ciba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
)

// Defaults of the request's lifetime and of the limits (Deps leaves them zero).
const (
	// DefaultExpiry is an auth_req_id's lifetime when the client asks for none (Keycloak's
	// default); MaxExpiry the longest a client may ask for with requested_expiry.
	DefaultExpiry = 120 * time.Second
	MaxExpiry     = 600 * time.Second
	// Interval is the least time between two polls (CIBA Core 7.3's default, 5 seconds).
	Interval = 5
	// KeepAfterExpiry is how long a request is kept after its expiry: an approved request can
	// still be polled within it, and a poll of an expired one is expired_token, not unknown.
	KeepAfterExpiry = 10 * time.Minute
	// DefaultMaxPerClientHint requests of one client for one hint, and DefaultMaxPerHint of
	// all clients for one hint, are accepted in a LimitWindow; more are refused.
	DefaultMaxPerClientHint = 5
	DefaultMaxPerHint       = 20
	DefaultLimitWindow      = 10 * time.Minute
)

// Bounds of the parameters, checked before anything is read.
const (
	// MaxBindingMessage is the longest binding_message, in characters: CIBA Core 7.1 wants a
	// short text shown on two screens.
	MaxBindingMessage = 100
	// MaxNotificationToken bounds client_notification_token (CIBA Core 7.1: 1024 characters
	// at least must be accepted, more is not asked for).
	MaxNotificationToken = 1024
	maxLoginHint         = 256
	maxIDTokenHint       = 16 << 10
	maxACRValues         = 512
)

// Deps are what New builds a Service from; each is required unless it says otherwise.
type Deps struct {
	// Tokens is the token domain: the client's rules, the signed request's verification, the
	// authorization_details' validation, the grant's lifetime, the home and the audit log.
	Tokens *oauth.Service
	// Requests keep the backchannel requests.
	Requests oauth.BackchannelStore
	// Users are the customers a hint names.
	Users oauth.UserStore
	// Limits count requests per hint (InteractionStore.CountFailure).
	Limits oauth.InteractionStore
	// Keys is the key registry an id_token_hint is verified against.
	Keys oauth.KeyStore
	// Device reaches the customer's authentication device.
	Device Device
	// Pinger tells a ping client its request is decided (optional: nil in a deployment
	// whose function only starts requests, such as the backchannel endpoint's; Decide then
	// does not ping and says so in the log, and the client can still poll).
	Pinger Pinger
	Clock  oauth.Clock
	Log    *slog.Logger

	// DefaultExpiry, MaxExpiry, MaxPerClientHint, MaxPerHint, LimitWindow: optional (zero is
	// the package's default).
	DefaultExpiry, MaxExpiry     time.Duration
	MaxPerClientHint, MaxPerHint int
	LimitWindow                  time.Duration
}

// Service is CIBA's use case.
type Service struct{ d Deps }

// New returns the Service of d, or an error naming every missing dependency.
func New(d Deps) (*Service, error) {
	var missing []error
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, errors.New("ciba: missing "+what))
		}
	}
	need(d.Tokens != nil, "Tokens")
	if d.Tokens != nil {
		if err := d.Tokens.Serves("ciba", false); err != nil {
			missing = append(missing, err)
		}
	}
	need(d.Requests != nil, "Requests")
	need(d.Users != nil, "Users")
	need(d.Limits != nil, "Limits")
	need(d.Keys != nil, "Keys")
	need(d.Device != nil, "Device")
	need(d.Clock != nil, "Clock")
	need(d.Log != nil, "Log")
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	if d.DefaultExpiry <= 0 {
		d.DefaultExpiry = DefaultExpiry
	}
	if d.MaxExpiry <= 0 {
		d.MaxExpiry = MaxExpiry
	}
	if d.MaxPerClientHint <= 0 {
		d.MaxPerClientHint = DefaultMaxPerClientHint
	}
	if d.MaxPerHint <= 0 {
		d.MaxPerHint = DefaultMaxPerHint
	}
	if d.LimitWindow <= 0 {
		d.LimitWindow = DefaultLimitWindow
	}
	if d.DefaultExpiry > d.MaxExpiry {
		return nil, fmt.Errorf("ciba: DefaultExpiry %v is above MaxExpiry %v", d.DefaultExpiry, d.MaxExpiry)
	}
	return &Service{d: d}, nil
}

// StartResponse is the backchannel authentication endpoint's success (CIBA Core 7.3).
type StartResponse struct {
	AuthReqID string `json:"auth_req_id"`
	ExpiresIn int64  `json:"expires_in"`
	Interval  int    `json:"interval,omitempty"`
}

// Start is the backchannel authentication endpoint for an authenticated client: it checks
// the request (CIBA Core 7.1, FAPI-CIBA for fapi2 clients), stores it and reaches the
// customer's device. Errors are *oauth.Error (CIBA Core 13).
func (s *Service) Start(ctx context.Context, client *oauth.Client, params url.Values) (*StartResponse, error) {
	return s.start(ctx, client, params)
}

// StartRequest is Start for a client request as the endpoint reads it: the client is
// authenticated as at the token endpoint (no DPoP proof: CIBA's endpoint takes none) and its
// one-time values (a client assertion's jti) are recorded only once the request has passed
// every check, with the signed request's jti, so a refused request writes nothing.
func (s *Service) StartRequest(ctx context.Context, r oauth.ClientRequest, params url.Values) (*StartResponse, error) {
	r.Proof = nil
	client, _, once, err := s.d.Tokens.AuthenticateTokenRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, client, params, once...)
}

// checked is a request that passed every check: what is stored, the key the limits count
// on, and the signed request's jti.
type checked struct {
	rec     oauth.BackchannelRequest
	hintKey string
	once    oauth.OneTime
}

func (s *Service) start(ctx context.Context, client *oauth.Client, params url.Values, once ...oauth.OneTime) (*StartResponse, error) {
	now := s.d.Clock.Now()
	c, err := s.check(ctx, client, params, now)
	if err != nil {
		s.refused(ctx, client.ID, err)
		return nil, err
	}
	if err := s.d.Tokens.Record(ctx, append(once, c.once)...); err != nil {
		s.refused(ctx, client.ID, err)
		return nil, err
	}
	// The limits count every checked request on its hint, a known customer's or not, so they
	// answer both alike; the counter is the limiter's own state, as the login's is.
	if err := s.limit(ctx, client.ID, c.hintKey, now); err != nil {
		s.refused(ctx, client.ID, err)
		return nil, err
	}
	authReqID := s.d.Tokens.NewAuthReqID()
	r := c.rec
	r.ID = oauth.BackchannelRequestID(authReqID)
	if r.Mode == oauth.CIBAModePing {
		r.AuthReqID = authReqID // the ping carries it (oauth.BackchannelRequest)
	}
	if err := s.d.Requests.PutBackchannelRequest(ctx, r); err != nil {
		return nil, oauth.AsError(fmt.Errorf("ciba: store the request: %w", err))
	}
	s.audit(ctx, "ciba_requested", client.ID, r.UID, slog.String("request", r.ID),
		slog.String("scope", r.Scopes.String()), slog.String("mode", r.Mode))
	// The device is reached only for a customer who exists; an unknown hint's request is
	// stored and answered the same way, and expires unanswered. A device that cannot be
	// reached leaves the request to expire: the client is answered as for any other request
	// (an error here would tell a known customer from an unknown one), and the failure is
	// logged and audited for the operator.
	if r.UID != "" {
		if err := s.d.Device.Reach(ctx, s.deviceRequest(ctx, &r, client)); err != nil {
			s.d.Log.ErrorContext(ctx, "ciba: reach the customer's device", slog.String("request", r.ID), slog.Any("err", err))
			s.audit(ctx, "ciba_device_failed", client.ID, r.UID, slog.String("request", r.ID))
		}
	}
	return &StartResponse{AuthReqID: authReqID, ExpiresIn: int64(r.ExpiresAt.Sub(now) / time.Second), Interval: r.Interval}, nil
}

// refused audits a refused request with the error's code (never a parameter's value).
func (s *Service) refused(ctx context.Context, clientID string, err error) {
	reason := "server_error"
	var oe *oauth.Error
	if errors.As(err, &oe) {
		reason = oe.Code
	}
	s.audit(ctx, "ciba_refused", clientID, "", slog.String("reason", reason))
}

// check validates a request of client and returns what to store; it writes nothing. The rules,
// each with its CIBA Core 13 error:
//   - the client is enabled and registered for the CIBA grant (unauthorized_client); a fapi2
//     client authenticates with private_key_jwt or its certificate (FAPI-CIBA 5.2.2, with FAPI's
//     client authentication) and sends a binding_message (FAPI-CIBA 5.2.2-2);
//   - a fapi2 client, or one registered with backchannel_authentication_request_signing_alg,
//     sends its request signed (CIBA Core 7.1.1, FAPI-CIBA 5.2.2); a signed request's
//     parameters are then the only ones;
//   - scope includes openid and only scopes the client may ask for (invalid_scope);
//   - exactly one of login_hint, id_token_hint and login_hint_token; login_hint_token is not
//     supported (its format is not CIBA's to say, and no profile of it is agreed here); an
//     id_token_hint is one of our id_tokens issued to this client, expired or not;
//   - binding_message short printable text without markup (invalid_binding_message);
//   - requested_expiry a whole number of seconds from 1 to MaxExpiry;
//   - authorization_details as at the authorization endpoint (invalid_authorization_details);
//   - client_notification_token, for a ping client, present and at most
//     MaxNotificationToken characters.
//
// A hint that names nobody (or a disabled customer) is no error: the request is kept with an
// empty UID, answered as any other, and reaches no device.
func (s *Service) check(ctx context.Context, client *oauth.Client, params url.Values, now time.Time) (*checked, error) {
	switch {
	case client.Disabled:
		return nil, oauth.UnauthorizedClient("the client is disabled")
	case !client.AllowsGrantType(oauth.GrantTypeCIBA):
		return nil, oauth.UnauthorizedClient("this client is not registered for the CIBA grant (" + oauth.GrantTypeCIBA + ")")
	case client.IsFAPI2() && !client.UsesPrivateKeyJWT() && !client.UsesMTLS():
		return nil, oauth.UnauthorizedClient("a fapi2 client must authenticate with private_key_jwt or tls_client_auth (FAPI-CIBA)")
	}
	mode := client.BackchannelTokenDeliveryMode
	if mode == "" {
		mode = oauth.CIBAModePoll
	}
	if mode != oauth.CIBAModePoll && mode != oauth.CIBAModePing {
		return nil, oauth.UnauthorizedClient("the client's backchannel_token_delivery_mode is not supported")
	}
	out := &checked{}
	mustSign := client.IsFAPI2() || client.BackchannelAuthenticationRequestSigningAlg != ""
	switch n := len(params["request"]); {
	case n > 1:
		return nil, oauth.InvalidRequest("the request parameter is repeated")
	case n == 0 && mustSign:
		return nil, oauth.InvalidRequest("this client must send a signed authentication request (the request parameter, CIBA Core 7.1.1)")
	case n == 1:
		v, once, err := s.d.Tokens.VerifyBackchannelRequest(ctx, client, params.Get("request"))
		if err != nil {
			return nil, err
		}
		params, out.once = v, once
	}
	scopes := oauth.ParseScopes(params.Get("scope"))
	if err := scopes.ValidateFor(client); err != nil {
		return nil, err
	}
	if !scopes.Has(oauth.ScopeOpenID) {
		return nil, oauth.InvalidScope("a CIBA request must include the openid scope (CIBA Core 7.1)")
	}
	uid, hintKey, err := s.customer(ctx, client, params)
	if err != nil {
		return nil, err
	}
	msg := params.Get("binding_message")
	if err := validBindingMessage(msg); err != nil {
		return nil, err
	}
	if msg == "" && client.IsFAPI2() {
		// FAPI-CIBA 5.2.2-2: a unique authorization context, or a binding_message; the
		// customer compares it with the client's screen.
		return nil, oauth.InvalidRequest("a fapi2 client must send a binding_message (FAPI-CIBA)")
	}
	expiry := s.d.DefaultExpiry
	if v := params.Get("requested_expiry"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || time.Duration(n)*time.Second > s.d.MaxExpiry {
			return nil, oauth.InvalidRequest("requested_expiry must be a whole number of seconds from 1 to %d", int64(s.d.MaxExpiry/time.Second))
		}
		expiry = time.Duration(n) * time.Second
	}
	acr := params.Get("acr_values")
	if len(acr) > maxACRValues {
		return nil, oauth.InvalidRequest("acr_values may be at most %d characters", maxACRValues)
	}
	details, err := s.d.Tokens.BackchannelAuthorizationDetails(client, params.Get("authorization_details"))
	if err != nil {
		return nil, err
	}
	token := params.Get("client_notification_token")
	switch {
	case mode == oauth.CIBAModePing && token == "":
		return nil, oauth.InvalidRequest("client_notification_token is required of a ping client (CIBA Core 7.1)")
	case len(token) > MaxNotificationToken:
		return nil, oauth.InvalidRequest("client_notification_token may be at most %d characters", MaxNotificationToken)
	case mode != oauth.CIBAModePing:
		token = "" // a poll client is never pinged: nothing to keep
	}
	out.hintKey = hintKey
	out.rec = oauth.BackchannelRequest{
		ClientID: client.ID, UID: uid, Scopes: scopes, AuthorizationDetails: details,
		BindingMessage: msg, ACRValues: strings.Fields(acr), Mode: mode, NotificationToken: token,
		Interval: Interval, CreatedAt: now, ExpiresAt: now.Add(expiry), KeepUntil: now.Add(expiry + KeepAfterExpiry),
		NextPollAt: now, State: oauth.CIBAPending,
	}
	return out, nil
}

// customer reads the hint: the customer it names ("" for nobody) and the key the limits count
// on, which comes from the hint itself (the normalised username, the id_token's sub), so a
// hint naming nobody counts as one naming a customer.
func (s *Service) customer(ctx context.Context, client *oauth.Client, params url.Values) (uid, hintKey string, err error) {
	login, idHint, hintToken := params.Get("login_hint"), params.Get("id_token_hint"), params.Get("login_hint_token")
	given := 0
	for _, h := range []string{login, idHint, hintToken} {
		if h != "" {
			given++
		}
	}
	if given != 1 {
		return "", "", oauth.InvalidRequest("exactly one of login_hint, id_token_hint and login_hint_token is required (CIBA Core 7.1)")
	}
	switch {
	case hintToken != "":
		return "", "", oauth.InvalidRequest("login_hint_token is not supported: name the customer with login_hint or id_token_hint")
	case idHint != "":
		if len(idHint) > maxIDTokenHint {
			return "", "", oauth.InvalidRequest("id_token_hint is too long")
		}
		h, err := logout.VerifyIDTokenHint(ctx, s.d.Keys, s.d.Tokens.Issuer, idHint)
		if errors.Is(err, logout.ErrBadRequest) {
			return "", "", oauth.InvalidRequest("id_token_hint is not an id_token this server issued")
		}
		if err != nil {
			return "", "", oauth.AsError(err)
		}
		if !slices.Contains(h.Aud, client.ID) {
			return "", "", oauth.InvalidRequest("id_token_hint was not issued to this client")
		}
		u, err := s.d.Users.GetUser(ctx, h.Sub)
		return s.known(u, err, "sub:"+h.Sub)
	default:
		if len(login) > maxLoginHint {
			return "", "", oauth.InvalidRequest("login_hint may be at most %d characters", maxLoginHint)
		}
		name := NormalizeUsername(login)
		if name == "" {
			return "", "", oauth.InvalidRequest("login_hint is empty")
		}
		u, err := s.d.Users.GetUserByUsername(ctx, name)
		if errors.Is(err, oauth.ErrNotFound) {
			// A username's lookup reads the username's item, then the user's (DynamoDB):
			// an unknown one stops after the first. The same second read here keeps the
			// answer's time from telling the two apart (TestRoundTrips_BackchannelRequest).
			_, _ = s.d.Users.GetUser(ctx, "ciba-no-user:"+oauth.HashToken(name))
		}
		return s.known(u, err, "username:"+name)
	}
}

// known turns a user lookup into the customer's uid: "" for none or a disabled one.
func (s *Service) known(u oauth.User, err error, hintKey string) (string, string, error) {
	if errors.Is(err, oauth.ErrNotFound) || (err == nil && u.Disabled) {
		return "", hintKey, nil
	}
	if err != nil {
		return "", "", oauth.AsError(fmt.Errorf("ciba: read the customer: %w", err))
	}
	return u.UID, hintKey, nil
}

// NormalizeUsername is how a login_hint names a username: as the sign-in reads one
// (authn.NormalizeUsername; TestNormalizeUsername_IsTheSignIns holds them together).
func NormalizeUsername(u string) string { return strings.ToLower(strings.TrimSpace(u)) }

// limitedDescription is the description of a request refused by the limits: it says nothing of
// whether the hint names a customer.
const limitedDescription = "too many authentication requests for this login hint; retry later"

// limit counts a request on the hint, per client and over all clients, and refuses it past
// either limit (access_denied, 429). The keys are hashes: a counter names no customer.
func (s *Service) limit(ctx context.Context, clientID, hintKey string, now time.Time) error {
	perClient := "ciba:ch:" + oauth.HashToken(clientID+"\x00"+hintKey)
	perHint := "ciba:h:" + oauth.HashToken(hintKey)
	n, err := s.d.Limits.CountFailure(ctx, perClient, s.d.LimitWindow, now)
	if err != nil {
		return oauth.AsError(fmt.Errorf("ciba: count the request: %w", err))
	}
	if n > s.d.MaxPerClientHint {
		return &oauth.Error{Code: oauth.ErrCodeAccessDenied, Description: limitedDescription, Status: 429}
	}
	m, err := s.d.Limits.CountFailure(ctx, perHint, s.d.LimitWindow, now)
	if err != nil {
		return oauth.AsError(fmt.Errorf("ciba: count the request: %w", err))
	}
	if m > s.d.MaxPerHint {
		return &oauth.Error{Code: oauth.ErrCodeAccessDenied, Description: limitedDescription, Status: 429}
	}
	return nil
}

// validBindingMessage checks a binding_message: at most MaxBindingMessage characters of
// UTF-8 letters, digits, punctuation, symbols and spaces, without the characters of markup
// (< > & " ' `) or any control character. The pages escape it anyway; this keeps a hostile
// text from reaching a device's notification, whose rendering we do not control.
func validBindingMessage(m string) error {
	if m == "" {
		return nil
	}
	if !utf8.ValidString(m) || utf8.RuneCountInString(m) > MaxBindingMessage {
		return oauth.InvalidBindingMessage("binding_message must be UTF-8 text of at most %d characters", MaxBindingMessage)
	}
	for _, r := range m {
		if strings.ContainsRune("<>&\"'`", r) || !unicode.IsPrint(r) {
			return oauth.InvalidBindingMessage("binding_message may hold letters, digits, spaces and punctuation, but no markup or control characters")
		}
	}
	return nil
}

// deviceRequest is what the device shows of r (never the auth_req_id).
func (s *Service) deviceRequest(ctx context.Context, r *oauth.BackchannelRequest, client *oauth.Client) DeviceRequest {
	name := ""
	if client != nil {
		name = client.Name
	} else if c, err := s.d.Tokens.Clients.GetClient(ctx, r.ClientID); err == nil {
		name = c.Name
	}
	if name == "" {
		name = r.ClientID
	}
	return DeviceRequest{
		Ref: r.ID, UID: r.UID, ClientID: r.ClientID, ClientName: name, BindingMessage: r.BindingMessage,
		Scopes: slices.Clone([]string(r.Scopes)), AuthorizationDetails: r.AuthorizationDetails, ExpiresAt: r.ExpiresAt,
	}
}

// Pending lists the requests awaiting uid's decision, newest first.
func (s *Service) Pending(ctx context.Context, uid string) ([]DeviceRequest, error) {
	if uid == "" {
		return nil, nil
	}
	now := s.d.Clock.Now()
	list, err := s.d.Requests.ListBackchannelRequests(ctx, uid, now)
	if err != nil {
		return nil, fmt.Errorf("ciba: list the requests: %w", err)
	}
	slices.SortFunc(list, func(a, b oauth.BackchannelRequest) int { return b.CreatedAt.Compare(a.CreatedAt) })
	out := make([]DeviceRequest, 0, len(list))
	for i := range list {
		r := &list[i]
		// The listing may lag a decision (an index): only what Request would show is shown.
		if r.UID != uid || r.State != oauth.CIBAPending || !now.Before(r.ExpiresAt) {
			continue
		}
		out = append(out, s.deviceRequest(ctx, r, nil))
	}
	return out, nil
}

// Request returns the pending request ref if it is uid's; ErrUnknownRequest otherwise.
func (s *Service) Request(ctx context.Context, ref, uid string) (DeviceRequest, error) {
	r, err := s.pending(ctx, ref, uid, s.d.Clock.Now())
	if err != nil {
		return DeviceRequest{}, err
	}
	if r.State != oauth.CIBAPending {
		return DeviceRequest{}, ErrUnknownRequest
	}
	return s.deviceRequest(ctx, r, nil), nil
}

// pending reads ref for uid: ErrUnknownRequest unless it is uid's and unexpired.
func (s *Service) pending(ctx context.Context, ref, uid string, now time.Time) (*oauth.BackchannelRequest, error) {
	if uid == "" || !strings.HasPrefix(ref, "bc_") || len(ref) > 200 {
		return nil, ErrUnknownRequest
	}
	r, err := s.d.Requests.GetBackchannelRequest(ctx, ref, now)
	if errors.Is(err, oauth.ErrNotFound) {
		return nil, ErrUnknownRequest
	}
	if err != nil {
		return nil, fmt.Errorf("ciba: read the request: %w", err)
	}
	if r.UID == "" || r.UID != uid || !now.Before(r.ExpiresAt) {
		return nil, ErrUnknownRequest
	}
	return &r, nil
}

// Decide records the customer's decision once (the errors above), audits it, and pings a
// ping client. The rules, in this order, each refused before anything is written: the request
// must be the customer's and unexpired (ErrUnknownRequest), undecided (ErrDecided); an approval
// needs strong authentication (ErrNotStrong) and, for a payment, evidence over its details
// (ErrPaymentLink). Of racing decisions exactly one is recorded (the store's conditional
// write); the others are ErrDecided.
func (s *Service) Decide(ctx context.Context, d Decision) error {
	now := s.d.Clock.Now()
	r, err := s.pending(ctx, d.Ref, d.UID, now)
	if err != nil {
		return err
	}
	if r.State != oauth.CIBAPending {
		return ErrDecided
	}
	dec := oauth.BackchannelDecision{Approve: d.Approve, Once: d.Once}
	if d.Approve {
		if !oauth.AMRStrong(d.AMR) {
			s.audit(ctx, "ciba_refused", r.ClientID, r.UID, slog.String("request", r.ID), slog.String("reason", "not_strong"))
			return ErrNotStrong
		}
		u, err := s.d.Users.GetUser(ctx, r.UID)
		if errors.Is(err, oauth.ErrNotFound) || (err == nil && u.Disabled) {
			return ErrUnknownRequest
		}
		if err != nil {
			return fmt.Errorf("ciba: read the customer: %w", err)
		}
		authTime := d.AuthTime
		if authTime.IsZero() || authTime.After(now) {
			authTime = now
		}
		g, err := s.d.Tokens.BackchannelGrant(r, &u, d.AMR, authTime, d.Evidence)
		if errors.Is(err, oauth.ErrPaymentNotLinked) {
			s.audit(ctx, "ciba_refused", r.ClientID, r.UID, slog.String("request", r.ID), slog.String("reason", "payment_not_linked"))
			return ErrPaymentLink
		}
		if err != nil {
			return err
		}
		dec.Grant = g
	}
	decided, err := s.d.Requests.DecideBackchannelRequest(ctx, r.ID, d.UID, dec, now)
	switch {
	case errors.Is(err, oauth.ErrReplayed):
		return ErrReplayed
	case errors.Is(err, oauth.ErrUsed):
		return ErrDecided
	case errors.Is(err, oauth.ErrNotFound):
		return ErrUnknownRequest
	case err != nil:
		return fmt.Errorf("ciba: record the decision: %w", err)
	}
	if d.Approve {
		oauth.WriteAudit(ctx, s.d.Tokens.AuditLogger(), "ciba_approved", dec.Grant, slog.String("request", decided.ID),
			slog.String("amr", strings.Join(d.AMR, " ")))
	} else {
		s.audit(ctx, "ciba_denied", decided.ClientID, decided.UID, slog.String("request", decided.ID))
	}
	s.ping(ctx, &decided)
	return nil
}

// ping tells a ping client its request is decided; a failure is logged (never the
// auth_req_id or the notification token) and changes nothing: the client can still poll.
func (s *Service) ping(ctx context.Context, r *oauth.BackchannelRequest) {
	if r.Mode != oauth.CIBAModePing {
		return
	}
	if s.d.Pinger == nil {
		s.d.Log.WarnContext(ctx, "ciba: no pinger: a ping client's request was decided unannounced", slog.String("request", r.ID))
		return
	}
	c, err := s.d.Tokens.Clients.GetClient(ctx, r.ClientID)
	if err != nil || c.BackchannelClientNotificationEndpoint == "" {
		s.d.Log.WarnContext(ctx, "ciba: the ping client has no notification endpoint", slog.String("request", r.ID), slog.Any("err", err))
		return
	}
	if err := s.d.Pinger.Ping(ctx, c.BackchannelClientNotificationEndpoint, r.NotificationToken, r.AuthReqID); err != nil {
		s.d.Log.WarnContext(ctx, "ciba: ping failed", slog.String("request", r.ID), slog.String("client_id", r.ClientID), slog.Any("err", err))
		s.audit(ctx, "ciba_ping_failed", r.ClientID, r.UID, slog.String("request", r.ID))
		return
	}
	s.audit(ctx, "ciba_pinged", r.ClientID, r.UID, slog.String("request", r.ID))
}

func (s *Service) audit(ctx context.Context, event, clientID, uid string, attrs ...slog.Attr) {
	oauth.WriteAudit(ctx, s.d.Tokens.AuditLogger(), event, &oauth.Grant{ClientID: clientID, UID: uid}, attrs...)
}
