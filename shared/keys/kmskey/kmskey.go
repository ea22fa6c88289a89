// Package kmskey is the production key backend: id_token signing keys are AWS KMS asymmetric
// SIGN_VERIFY keys that never leave KMS: RSA_2048 for RS256 and for PS256 (separate keys),
// ECC_NIST_P256 for ES256. A key's ref is its key ARN; signing sends only the SHA-256 digest
// (MessageType DIGEST, with RSASSA_PKCS1_V1_5_SHA_256, RSASSA_PSS_SHA_256 or ECDSA_SHA_256),
// one Sign call per token; KMS's DER ECDSA signatures are turned into JWS's R||S here. Aliases, when configured, are for people browsing the console; the adapter never signs
// through one, so an alias moving can never make a kid and its signature disagree.
package kmskey

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

// Defaults of Options.
const (
	DefaultTagKey   = "authserver:purpose"
	DefaultTagValue = "id-token-signing"
	// DefaultDescription describes each key; %s is its algorithm.
	DefaultDescription = "authserver id_token signing key (%s); managed by the key rotation, do not use elsewhere"
	// DefaultPendingWindowDays is how long a deleted key can still be recovered
	// (CancelKeyDeletion) before KMS destroys it: KMS's own maximum, since a bank would rather
	// pay a month of key storage than lose a key by mistake.
	DefaultPendingWindowDays = 30
	// MinPendingWindowDays is KMS's minimum waiting period.
	MinPendingWindowDays = 7
)

// Options say how the adapter marks the keys it creates.
type Options struct {
	// TagKey and TagValue tag every key the rotation creates, so operators (and IAM
	// conditions such as aws:ResourceTag) can tell our signing keys apart.
	TagKey, TagValue string
	// AliasPrefix, when set, gives each key the alias AliasPrefix+kid (e.g.
	// "alias/authserver/idtoken/"), for people; it must start with "alias/".
	AliasPrefix string
	// Description of each key, a format with one %s for the algorithm (DefaultDescription).
	Description string
	// PendingWindowDays is the KMS waiting period of ScheduleDeletion (7 to 30 days).
	PendingWindowDays int32
	// Policy, when set, is the key policy of every key CreateKey makes (named administrators,
	// signers and rotation; KeyPolicy). Unset, keys get KMS's default policy.
	Policy *KeyPolicy
}

// Backend signs with KMS keys.
type Backend struct {
	client *kms.Client
	opts   Options
	pubs   sync.Map // ref → crypto.PublicKey; a key's public half never changes
}

// kmsAlg is how KMS makes the keys and signatures of one JWS algorithm.
type kmsAlg struct {
	spec types.KeySpec
	sign types.SigningAlgorithmSpec
}

// kmsAlgs maps each JWS algorithm to its KMS key spec and signing algorithm. PS256 and RS256
// keys share a spec but never a key: the Rotator creates each algorithm's keys apart.
var kmsAlgs = map[string]kmsAlg{
	keys.RS256: {types.KeySpecRsa2048, types.SigningAlgorithmSpecRsassaPkcs1V15Sha256},
	keys.PS256: {types.KeySpecRsa2048, types.SigningAlgorithmSpecRsassaPssSha256},
	keys.ES256: {types.KeySpecEccNistP256, types.SigningAlgorithmSpecEcdsaSha256},
}

// KeySpecs returns the KMS key specs the adapter creates, sorted: what the template's
// kms:KeySpec condition on CreateKey must allow.
func KeySpecs() []string {
	var out []string
	for _, a := range kmsAlgs {
		out = append(out, string(a.spec))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SigningAlgorithms returns the KMS signing algorithms the adapter signs with, sorted: what the
// template's kms:SigningAlgorithm condition on Sign must allow.
func SigningAlgorithms() []string {
	var out []string
	for _, a := range kmsAlgs {
		out = append(out, string(a.sign))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func lookupAlg(alg string) (kmsAlg, error) {
	a, ok := kmsAlgs[alg]
	if !ok {
		return kmsAlg{}, fmt.Errorf("kms: %w %q", keys.ErrUnsupportedAlg, alg)
	}
	return a, nil
}

var _ keys.Backend = (*Backend)(nil)

// New returns a backend over client. Zero options take the defaults; a pending window
// outside KMS's 7–30 days is clamped into it.
func New(client *kms.Client, opts Options) *Backend {
	if opts.TagKey == "" {
		opts.TagKey = DefaultTagKey
	}
	if opts.TagValue == "" {
		opts.TagValue = DefaultTagValue
	}
	if opts.Description == "" {
		opts.Description = DefaultDescription
	}
	switch {
	case opts.PendingWindowDays == 0:
		opts.PendingWindowDays = DefaultPendingWindowDays
	case opts.PendingWindowDays < MinPendingWindowDays:
		opts.PendingWindowDays = MinPendingWindowDays
	case opts.PendingWindowDays > 30:
		opts.PendingWindowDays = 30
	}
	if opts.AliasPrefix != "" && !strings.HasSuffix(opts.AliasPrefix, "/") && !strings.HasSuffix(opts.AliasPrefix, "-") {
		opts.AliasPrefix += "/"
	}
	return &Backend{client: client, opts: opts}
}

// CreateKey creates a SIGN_VERIFY key of alg's spec (RSA_2048 or ECC_NIST_P256) with our tag,
// reads its public key and, when configured, names it with an alias. Should a step after
// CreateKey fail, the new key is scheduled for deletion so that no unregistered key lingers.
func (b *Backend) CreateKey(ctx context.Context, alg string) (string, crypto.PublicKey, error) {
	a, err := lookupAlg(alg)
	if err != nil {
		return "", nil, err
	}
	in := &kms.CreateKeyInput{
		KeySpec:     a.spec,
		KeyUsage:    types.KeyUsageTypeSignVerify,
		Description: aws.String(description(b.opts.Description, alg)),
		Tags:        []types.Tag{{TagKey: aws.String(b.opts.TagKey), TagValue: aws.String(b.opts.TagValue)}},
	}
	if b.opts.Policy != nil {
		doc, err := b.opts.Policy.document(string(a.sign))
		if err != nil {
			return "", nil, err
		}
		// The rotation that creates the key may not change its policy (the administrators
		// may), which KMS's lockout safety check would otherwise refuse.
		in.Policy, in.BypassPolicyLockoutSafetyCheck = aws.String(doc), true
	}
	out, err := b.client.CreateKey(ctx, in)
	if err != nil {
		return "", nil, fmt.Errorf("kms CreateKey: %w", Classify(err))
	}
	if out.KeyMetadata == nil || aws.ToString(out.KeyMetadata.Arn) == "" {
		return "", nil, errors.New("kms CreateKey: response without a key ARN")
	}
	ref := aws.ToString(out.KeyMetadata.Arn)
	undo := func(cause error) (string, crypto.PublicKey, error) {
		if derr := b.ScheduleDeletion(context.WithoutCancel(ctx), ref); derr != nil {
			cause = errors.Join(cause, fmt.Errorf("and could not schedule the new key %s for deletion: %w", ref, derr))
		}
		return "", nil, cause
	}
	pub, err := b.PublicKey(ctx, ref)
	if err != nil {
		return undo(err)
	}
	if err := keys.CheckKey(alg, pub); err != nil {
		return undo(fmt.Errorf("kms CreateKey %s: %w", ref, err))
	}
	if b.opts.AliasPrefix != "" {
		kid, err := keys.Thumbprint(pub)
		if err != nil {
			return undo(err)
		}
		_, err = b.client.CreateAlias(ctx, &kms.CreateAliasInput{
			AliasName: aws.String(b.opts.AliasPrefix + kid), TargetKeyId: aws.String(ref)})
		if err != nil {
			return undo(fmt.Errorf("kms CreateAlias for %s: %w", ref, Classify(err)))
		}
	}
	return ref, pub, nil
}

// Sign has KMS sign a SHA-256 digest with alg's signing algorithm (RSASSA_PKCS1_V1_5_SHA_256,
// RSASSA_PSS_SHA_256 or ECDSA_SHA_256): one Sign call. An ES256 signature comes back in DER
// and is returned as R||S.
func (b *Backend) Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("kms Sign: digest must be 32 bytes, got %d", len(digest))
	}
	a, err := lookupAlg(alg)
	if err != nil {
		return nil, err
	}
	out, err := b.client.Sign(ctx, &kms.SignInput{
		KeyId:            aws.String(ref),
		Message:          digest,
		MessageType:      types.MessageTypeDigest,
		SigningAlgorithm: a.sign,
	})
	if err != nil {
		return nil, fmt.Errorf("kms Sign with %s: %w", ref, Classify(err))
	}
	if len(out.Signature) == 0 {
		return nil, fmt.Errorf("kms Sign with %s: empty signature", ref)
	}
	if alg == keys.ES256 {
		sig, err := keys.ES256FromDER(out.Signature)
		if err != nil {
			return nil, fmt.Errorf("kms Sign with %s: %w", ref, err)
		}
		return sig, nil
	}
	return out.Signature, nil
}

// PublicKey returns the public half of ref (GetPublicKey once per ref, then cached): an
// *rsa.PublicKey for an RSA_2048 key, an *ecdsa.PublicKey for an ECC_NIST_P256 key.
func (b *Backend) PublicKey(ctx context.Context, ref string) (crypto.PublicKey, error) {
	if pub, ok := b.pubs.Load(ref); ok {
		return pub, nil
	}
	out, err := b.client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(ref)})
	if err != nil {
		return nil, fmt.Errorf("kms GetPublicKey %s: %w", ref, Classify(err))
	}
	var alg string // any algorithm of the spec, to check the parsed key against
	switch out.KeySpec {
	case types.KeySpecRsa2048:
		alg = keys.RS256
	case types.KeySpecEccNistP256:
		alg = keys.ES256
	}
	if out.KeyUsage != types.KeyUsageTypeSignVerify || alg == "" {
		return nil, fmt.Errorf("kms key %s is %s/%s, want an RSA_2048 or ECC_NIST_P256 SIGN_VERIFY key", ref, out.KeySpec, out.KeyUsage)
	}
	pub, err := x509.ParsePKIXPublicKey(out.PublicKey) // DER SubjectPublicKeyInfo
	if err != nil {
		return nil, fmt.Errorf("kms GetPublicKey %s: parse: %w", ref, err)
	}
	if err := keys.CheckKey(alg, pub); err != nil {
		return nil, fmt.Errorf("kms key %s: %w", ref, err)
	}
	b.pubs.Store(ref, pub)
	return pub, nil
}

// ScheduleDeletion schedules the key's destruction after the pending window; from now on
// Sign with it fails. A key already pending deletion or unknown to KMS is not an error.
func (b *Backend) ScheduleDeletion(ctx context.Context, ref string) error {
	_, err := b.client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{
		KeyId: aws.String(ref), PendingWindowInDays: aws.Int32(b.opts.PendingWindowDays)})
	if err != nil {
		var nf *types.NotFoundException
		var st *types.KMSInvalidStateException
		if errors.As(err, &nf) || (errors.As(err, &st) && strings.Contains(strings.ToLower(st.ErrorMessage()), "pending deletion")) {
			b.pubs.Delete(ref)
			return nil
		}
		return fmt.Errorf("kms ScheduleKeyDeletion %s: %w", ref, Classify(err))
	}
	b.pubs.Delete(ref)
	return nil
}

// description fills the algorithm into a description format (one without a verb is kept as is).
func description(format, alg string) string {
	if strings.Contains(format, "%s") {
		return fmt.Sprintf(format, alg)
	}
	return format
}

// transientCodes are KMS error codes that retrying later can fix.
var transientCodes = map[string]bool{
	"ThrottlingException":        true,
	"KMSInternalException":       true,
	"DependencyTimeoutException": true,
	"KeyUnavailableException":    true,
	"RequestTimeout":             true,
	"RequestTimeoutException":    true,
	"ServiceUnavailable":         true,
	"InternalFailure":            true,
}

// goneCodes mean the key cannot be used any more: unknown, disabled or pending deletion.
var goneCodes = map[string]bool{
	"NotFoundException":        true,
	"KMSInvalidStateException": true,
	"DisabledException":        true,
}

// Classify marks err with oauth.ErrTransient when retrying later can fix it (throttling,
// 5xx, timeouts, an unreachable endpoint), and with keys.ErrUnknownKey when the key is gone.
func Classify(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch {
		case transientCodes[api.ErrorCode()]:
			return fmt.Errorf("%w: %w", oauth.ErrTransient, err)
		case goneCodes[api.ErrorCode()]:
			return fmt.Errorf("%w: %w", keys.ErrUnknownKey, err)
		}
	}
	var resp *smithyhttp.ResponseError
	var maxAttempts *retry.MaxAttemptsError
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &resp) && resp.HTTPStatusCode() >= 500) ||
		errors.As(err, &maxAttempts) || errors.As(err, &netErr) {
		return fmt.Errorf("%w: %w", oauth.ErrTransient, err)
	}
	return err
}
