// Package kmsfake is a TEST DOUBLE of AWS KMS, not an emulator and never a production
// dependency: an httptest server that speaks the KMS JSON protocol (awsJson1_1: POST /, header
// X-Amz-Target: TrentService.<Operation>, Content-Type application/x-amz-json-1.1, SigV4
// signed) for the operations the key adapter uses: CreateKey, GetPublicKey, Sign,
// ScheduleKeyDeletion, CreateAlias and DescribeKey. It holds real RSA 2048 keys, answers with
// the response shapes and error codes KMS documents (NotFoundException,
// KMSInvalidStateException, ValidationException, ...), and can inject failures such as
// ThrottlingException, so the real aws-sdk-go-v2 client can be tested against it (no KMS
// emulator can be installed on the build machines; see DESIGN.md). It counts calls per
// operation, so tests can prove that one id_token costs exactly one Sign.
package kmsfake

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// Region and Account are what the double puts in the ARNs it makes.
const (
	Region  = "eu-west-1"
	Account = "111122223333"
)

// Server is the KMS test double.
type Server struct {
	*httptest.Server

	mu      sync.Mutex
	keys    map[string]*key // by key id
	aliases map[string]string
	calls   map[string]int
	keyIDs  map[string][]string // KeyId parameters received, per operation
	faults  map[string][]Fault
	seq     int
	// Now stamps CreationDate and DeletionDate; tests may replace it before use.
	Now func() time.Time
}

// Fault is an injected failure: the HTTP status and the error type KMS would answer. The zero
// Fault (Pass) lets its call through, so Fail(op, Pass, 1) then Fail(op, Throttling, 1) fails
// the second call.
type Fault struct {
	Status  int
	Type    string
	Message string
}

// Faults KMS answers that a client must treat as retryable, and Pass.
var (
	Pass        = Fault{}
	Throttling  = Fault{Status: http.StatusBadRequest, Type: "ThrottlingException", Message: "Rate exceeded"}
	Internal    = Fault{Status: http.StatusInternalServerError, Type: "KMSInternalException", Message: "internal error"}
	Dependency  = Fault{Status: http.StatusInternalServerError, Type: "DependencyTimeoutException", Message: "dependency timeout"}
	Unavailable = Fault{Status: http.StatusInternalServerError, Type: "KeyUnavailableException", Message: "key unavailable"}
)

type key struct {
	id, arn     string
	priv        *rsa.PrivateKey
	state       string // Enabled, PendingDeletion
	description string
	tags        []tag
	created     time.Time
	deletion    time.Time
}

type tag struct{ TagKey, TagValue string }

// New starts the double; it stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{keys: map[string]*key{}, aliases: map[string]string{}, calls: map[string]int{},
		keyIDs: map[string][]string{}, faults: map[string][]Fault{}, Now: time.Now}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Client returns the real aws-sdk-go-v2 KMS client pointed at the double, with static
// credentials and the SDK's retries disabled (so each call reaches the double once and call
// counts are exact); optFns may change that.
func (s *Server) Client(optFns ...func(*kms.Options)) *kms.Client {
	opts := kms.Options{
		Region:           Region,
		BaseEndpoint:     aws.String(s.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       s.Server.Client(),
	}
	return kms.New(opts, optFns...)
}

// Fail makes the next n calls of op (e.g. "Sign") answer f.
func (s *Server) Fail(op string, f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[op] = append(s.faults[op], f)
	}
}

// Calls returns how many requests op received (failed ones included).
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// KeyIDs returns the KeyId parameters op received, in order.
func (s *Server) KeyIDs(op string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keyIDs[op]...)
}

// KeyState returns the state of the key with this id or ARN ("" when unknown).
func (s *Server) KeyState(keyID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.resolve(keyID); k != nil {
		return k.state
	}
	return ""
}

// Tags returns the tags of a key as a map.
func (s *Server) Tags(keyID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	if k := s.resolve(keyID); k != nil {
		for _, t := range k.tags {
			out[t.TagKey] = t.TagValue
		}
	}
	return out
}

// Aliases returns alias name → target key ARN.
func (s *Server) Aliases() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for a, id := range s.aliases {
		out[a] = s.keys[id].arn
	}
	return out
}

// apiError is an error response of the JSON protocol.
type apiError struct {
	status   int
	typ, msg string
}

func errf(status int, typ, format string, args ...any) *apiError {
	return &apiError{status: status, typ: typ, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "TrentService.")
	var out any
	var aerr *apiError
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/" || !ok:
		aerr = errf(http.StatusBadRequest, "UnknownOperationException", "unknown operation %q", target)
	case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
		aerr = errf(http.StatusBadRequest, "SerializationException", "bad content type %q", r.Header.Get("Content-Type"))
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="):
		aerr = errf(http.StatusBadRequest, "MissingAuthenticationTokenException", "request is not signed")
	default:
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			aerr = errf(http.StatusBadRequest, "SerializationException", "read body: %v", err)
			break
		}
		out, aerr = s.dispatch(op, body)
	}
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("req-%d", time.Now().UnixNano()))
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if aerr != nil {
		w.WriteHeader(aerr.status)
		json.NewEncoder(w).Encode(map[string]string{"__type": aerr.typ, "message": aerr.msg})
		return
	}
	json.NewEncoder(w).Encode(out)
}

func (s *Server) dispatch(op string, body []byte) (any, *apiError) {
	var in struct {
		KeyID               string `json:"KeyId"`
		KeySpec             string
		KeyUsage            string
		Description         string
		Tags                []tag
		Message             []byte // base64 in JSON, as the protocol encodes blobs
		MessageType         string
		SigningAlgorithm    string
		PendingWindowInDays *int32
		AliasName           string
		TargetKeyID         string `json:"TargetKeyId"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errf(http.StatusBadRequest, "SerializationException", "bad JSON: %v", err)
	}
	if op == "CreateKey" { // generate outside the lock: it is the slow part
		return s.createKey(in.KeySpec, in.KeyUsage, in.Description, in.Tags)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if in.KeyID != "" {
		s.keyIDs[op] = append(s.keyIDs[op], in.KeyID)
	}
	if f := s.faults[op]; len(f) > 0 {
		s.faults[op] = f[1:]
		if f[0] != Pass {
			return nil, errf(f[0].Status, f[0].Type, "%s", f[0].Message)
		}
	}
	switch op {
	case "GetPublicKey":
		k, aerr := s.usable(in.KeyID)
		if aerr != nil {
			return nil, aerr
		}
		der, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
		if err != nil {
			return nil, errf(http.StatusInternalServerError, "KMSInternalException", "%v", err)
		}
		return map[string]any{"KeyId": k.arn, "PublicKey": der, "KeySpec": "RSA_2048", "CustomerMasterKeySpec": "RSA_2048",
			"KeyUsage": "SIGN_VERIFY", "SigningAlgorithms": signingAlgorithms}, nil
	case "Sign":
		k, aerr := s.usable(in.KeyID)
		if aerr != nil {
			return nil, aerr
		}
		return sign(k, in.Message, in.MessageType, in.SigningAlgorithm)
	case "DescribeKey":
		k := s.resolve(in.KeyID)
		if k == nil {
			return nil, errf(http.StatusBadRequest, "NotFoundException", "Key '%s' does not exist", in.KeyID)
		}
		return map[string]any{"KeyMetadata": metadata(k)}, nil
	case "ScheduleKeyDeletion":
		k := s.resolve(in.KeyID)
		if k == nil {
			return nil, errf(http.StatusBadRequest, "NotFoundException", "Key '%s' does not exist", in.KeyID)
		}
		days := int32(30)
		if in.PendingWindowInDays != nil {
			days = *in.PendingWindowInDays
		}
		if days < 7 || days > 30 {
			return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value '%d' at 'pendingWindowInDays' failed to satisfy constraint: Member must have value between 7 and 30", days)
		}
		if k.state == "PendingDeletion" {
			return nil, errf(http.StatusBadRequest, "KMSInvalidStateException", "%s is pending deletion.", k.arn)
		}
		k.state, k.deletion = "PendingDeletion", s.Now().AddDate(0, 0, int(days))
		return map[string]any{"KeyId": k.arn, "DeletionDate": epoch(k.deletion), "KeyState": k.state, "PendingWindowInDays": days}, nil
	case "CreateAlias":
		if !strings.HasPrefix(in.AliasName, "alias/") || strings.HasPrefix(in.AliasName, "alias/aws/") || len(in.AliasName) > 256 {
			return nil, errf(http.StatusBadRequest, "ValidationException", "Alias must start with the prefix \"alias/\" and may not use the reserved prefix \"alias/aws/\"")
		}
		if _, taken := s.aliases[in.AliasName]; taken {
			return nil, errf(http.StatusBadRequest, "AlreadyExistsException", "An alias with the name arn:aws:kms:%s:%s:%s already exists", Region, Account, in.AliasName)
		}
		k, aerr := s.usable(in.TargetKeyID)
		if aerr != nil {
			return nil, aerr
		}
		s.aliases[in.AliasName] = k.id
		return struct{}{}, nil
	}
	return nil, errf(http.StatusBadRequest, "UnknownOperationException", "the double does not implement %s", op)
}

var signingAlgorithms = []string{"RSASSA_PKCS1_V1_5_SHA_256", "RSASSA_PKCS1_V1_5_SHA_384", "RSASSA_PKCS1_V1_5_SHA_512",
	"RSASSA_PSS_SHA_256", "RSASSA_PSS_SHA_384", "RSASSA_PSS_SHA_512"}

func (s *Server) createKey(spec, usage, desc string, tags []tag) (any, *apiError) {
	s.mu.Lock()
	s.calls["CreateKey"]++
	if f := s.faults["CreateKey"]; len(f) > 0 {
		s.faults["CreateKey"] = f[1:]
		if f[0] != Pass {
			s.mu.Unlock()
			return nil, errf(f[0].Status, f[0].Type, "%s", f[0].Message)
		}
	}
	s.mu.Unlock()
	if spec != "RSA_2048" || usage != "SIGN_VERIFY" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "the double only makes RSA_2048 SIGN_VERIFY keys, not %s %s", spec, usage)
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, errf(http.StatusInternalServerError, "KMSInternalException", "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", s.seq, s.seq)
	k := &key{id: id, arn: fmt.Sprintf("arn:aws:kms:%s:%s:key/%s", Region, Account, id), priv: priv,
		state: "Enabled", description: desc, tags: tags, created: s.Now()}
	s.keys[id] = k
	return map[string]any{"KeyMetadata": metadata(k)}, nil
}

func metadata(k *key) map[string]any {
	m := map[string]any{"AWSAccountId": Account, "Arn": k.arn, "KeyId": k.id, "CreationDate": epoch(k.created),
		"Description": k.description, "Enabled": k.state == "Enabled", "KeyManager": "CUSTOMER", "KeySpec": "RSA_2048",
		"CustomerMasterKeySpec": "RSA_2048", "KeyState": k.state, "KeyUsage": "SIGN_VERIFY", "MultiRegion": false,
		"Origin": "AWS_KMS", "SigningAlgorithms": signingAlgorithms}
	if !k.deletion.IsZero() {
		m["DeletionDate"] = epoch(k.deletion)
	}
	return m
}

// epoch is a timestamp as the JSON protocol sends it: seconds since 1970 as a number.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// resolve finds a key by id, key ARN, alias name or alias ARN, as KMS does. Call with mu held.
func (s *Server) resolve(keyID string) *key {
	if id, ok := strings.CutPrefix(keyID, fmt.Sprintf("arn:aws:kms:%s:%s:", Region, Account)); ok {
		keyID = id
	}
	if id, ok := strings.CutPrefix(keyID, "key/"); ok {
		keyID = id
	}
	if strings.HasPrefix(keyID, "alias/") {
		keyID = s.aliases[keyID]
	}
	return s.keys[keyID]
}

// usable resolves a key that may be used now. Call with mu held.
func (s *Server) usable(keyID string) (*key, *apiError) {
	if keyID == "" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'keyId' failed to satisfy constraint: Member must not be null")
	}
	k := s.resolve(keyID)
	if k == nil {
		return nil, errf(http.StatusBadRequest, "NotFoundException", "Key '%s' does not exist", keyID)
	}
	if k.state != "Enabled" {
		return nil, errf(http.StatusBadRequest, "KMSInvalidStateException", "%s is pending deletion.", k.arn)
	}
	return k, nil
}

func sign(k *key, msg []byte, msgType, alg string) (any, *apiError) {
	if alg != "RSASSA_PKCS1_V1_5_SHA_256" {
		return nil, errf(http.StatusBadRequest, "ValidationException", "the double signs only with RSASSA_PKCS1_V1_5_SHA_256, not %q", alg)
	}
	digest := msg
	switch msgType {
	case "", "RAW":
		if len(msg) > 4096 {
			return nil, errf(http.StatusBadRequest, "ValidationException", "message longer than 4096 bytes")
		}
		sum := sha256.Sum256(msg)
		digest = sum[:]
	case "DIGEST":
		if len(msg) != sha256.Size {
			return nil, errf(http.StatusBadRequest, "ValidationException", "Digest is invalid length for algorithm RSASSA_PKCS1_V1_5_SHA_256.")
		}
	default:
		return nil, errf(http.StatusBadRequest, "ValidationException", "bad MessageType %q", msgType)
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.priv, crypto.SHA256, digest)
	if err != nil {
		return nil, errf(http.StatusInternalServerError, "KMSInternalException", "%v", err)
	}
	return map[string]any{"KeyId": k.arn, "Signature": sig, "SigningAlgorithm": alg}, nil
}
