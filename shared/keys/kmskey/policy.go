package kmskey

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// KeyPolicy names the principals of the signing keys the rotation creates; with it CreateKey
// gives each key this policy instead of KMS's default one (which lets every principal whose
// IAM policies allow kms:Sign on "*" sign id_tokens).
type KeyPolicy struct {
	// Partition and Account are the key's account ("aws", "123456789012").
	Partition, Account string
	// Administrators are the role ARNs that may change the key's policy, tags and state and
	// schedule its deletion, but not sign. None: the account's IAM policies decide that.
	Administrators []string
	// Signers are the role ARNs that may sign (the token function's), with the key's own
	// signing algorithm only. Every other principal is denied kms:Sign explicitly.
	Signers []string
	// Manager is the role ARN of the rotation: it reads the public key, names the key with an
	// alias (Options.AliasPrefix) and schedules its deletion, and nothing else (it cannot
	// change the policy it wrote).
	Manager string
}

// adminActions are what a key administrator may do: everything but use the key.
var adminActions = []string{"kms:DescribeKey", "kms:GetKeyPolicy", "kms:ListResourceTags", "kms:ListKeyPolicies", "kms:ListGrants",
	"kms:PutKeyPolicy", "kms:EnableKey", "kms:DisableKey", "kms:UpdateKeyDescription", "kms:TagResource", "kms:UntagResource",
	"kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion", "kms:RevokeGrant", "kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias"}

type policyDoc struct {
	Version   string
	Statement []policyStatement
}

type policyStatement struct {
	Sid       string
	Effect    string
	Principal any
	Action    []string
	Resource  string
	Condition map[string]map[string]any `json:",omitempty"`
}

// validate refuses a policy that would lock the key (no signer, no manager) or name a
// principal that is not an ARN.
func (p KeyPolicy) validate() error {
	if p.Partition == "" || p.Account == "" {
		return errors.New("kms key policy: Partition and Account are required")
	}
	if len(p.Signers) == 0 || p.Manager == "" {
		return errors.New("kms key policy: Signers and Manager are required")
	}
	for _, a := range append(append(append([]string{}, p.Administrators...), p.Signers...), p.Manager) {
		if !strings.HasPrefix(a, "arn:") {
			return fmt.Errorf("kms key policy: principal %q is not an ARN", a)
		}
	}
	return nil
}

// document is the policy of a key that signs with signingAlg (a KMS SigningAlgorithmSpec).
func (p KeyPolicy) document(signingAlg string) (string, error) {
	if err := p.validate(); err != nil {
		return "", err
	}
	var admins any = map[string]any{"AWS": "arn:" + p.Partition + ":iam::" + p.Account + ":root"}
	if len(p.Administrators) > 0 {
		admins = map[string]any{"AWS": p.Administrators}
	}
	doc := policyDoc{Version: "2012-10-17", Statement: []policyStatement{
		{Sid: "KeyAdministration", Effect: "Allow", Principal: admins, Action: adminActions, Resource: "*"},
		{Sid: "TokenFunctionSigns", Effect: "Allow", Principal: map[string]any{"AWS": p.Signers}, Action: []string{"kms:Sign"}, Resource: "*",
			Condition: map[string]map[string]any{"StringEquals": {"kms:SigningAlgorithm": signingAlg}}},
		{Sid: "RotationManages", Effect: "Allow", Principal: map[string]any{"AWS": p.Manager},
			Action: []string{"kms:DescribeKey", "kms:GetPublicKey", "kms:ScheduleKeyDeletion", "kms:CreateAlias"}, Resource: "*"},
		{Sid: "NoOneElseSigns", Effect: "Deny", Principal: "*", Action: []string{"kms:Sign"}, Resource: "*",
			Condition: map[string]map[string]any{"ArnNotEquals": {"aws:PrincipalArn": p.Signers}}},
		{Sid: "NoGrants", Effect: "Deny", Principal: "*", Action: []string{"kms:CreateGrant"}, Resource: "*"},
	}}
	b, err := json.Marshal(doc)
	return string(b), err
}
