package template_test

import (
	"github.com/acmebank/authserver/test/template/cfn"
)

// deployments are the stacks the template tests evaluate tpl for: every combination of the
// domain configurations of domains_test.go (and two more: one setting Issuer and the
// authorizer's and introspection's lists, one production stack with every optional setting of
// the connect host and alarm e-mail; one sending alarms to an existing topic without reserved
// concurrency), single region or either region of a pair, KMS Sign or data keys, with or
// without a key tag and DPoP nonces; only those the parameter checks and Rules accept, as
// CloudFormation refuses the others before it creates anything.
// TestTransform_DeploymentsGiveEveryConditionBothValues keeps the list complete.
func deployments(tpl *cfn.Template) []*cfn.Evaluator {
	var domains []map[string]string
	for _, dc := range domainConfigs {
		if dc.refused == "" {
			domains = append(domains, dc.params)
		}
	}
	domains = append(domains,
		map[string]string{"BaseUrl": "https://auth.bank.example", "Issuer": "https://auth.bank.example/v2/authentication/oauth2",
			"IntrospectionClients": "rs1,rs2", "RouteScopes": `{"GET /v2/bank/accounts":["openid"]}`,
			"ClientTokenRoutes": "GET /v2/bank/accounts,GET /invoicing/invoices"},
		map[string]string{"Environment": "production", "CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example",
			"CertificateArn": testCert, "PublicCertificateArn": testPublicCert, "TruststoreUri": "s3://truststore/ca.pem",
			"TruststoreVersion": "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", "HostedZoneId": "Z0123456789ABCDEFGHIJ",
			"DeprecationSunset": "Thu, 31 Dec 2026 23:59:59 GMT", "KeyAdminRoleArns": keyAdmin, "AlarmEmail": "ops@bank.example",
			"BackendListenerArn": testListener, "BackendVpcSubnetIds": testSubnets, "BackendVpcSecurityGroupIds": testSecurityGroups},
		// Customer-managed keys for the table, logs and environment: without the other
		// replica's key (one region only), and with it (a multi-region pair only).
		customerKeys(false), customerKeys(true),
		// The failover runbook's switch: the rotation moved to the secondary region (refused
		// by the rules in a single region).
		map[string]string{"BaseUrl": "https://auth.bank.example", "RotationRegion": "eu-central-1"},
		// The operations' other choices: alarms to an existing topic, no reserved concurrency.
		map[string]string{"BaseUrl": "https://auth.bank.example", "AlarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:bank-ops",
			"ReserveConcurrency": "Disabled"},
		// The bank's CloudTrail log group: KMS use by other principals is watched.
		map[string]string{"BaseUrl": "https://auth.bank.example", "CloudTrailLogGroupName": cloudTrail})
	var out []*cfn.Evaluator
	for _, domain := range domains {
		for _, region := range []string{"", "eu-west-1", "eu-central-1"} {
			for _, signing := range []string{"kms-sign", "data-key"} {
				for _, tag := range []string{"", "prod-keys"} {
					for _, dpop := range []string{"Disabled", "Enabled"} {
						params := map[string]string{"SigningMode": signing, "KeyTag": tag, "DPoPNonces": dpop}
						if region != "" {
							params = multiRegion(region)
							params["SigningMode"], params["KeyTag"], params["DPoPNonces"] = signing, tag, dpop
							delete(params, "BaseUrl")
						}
						for k, v := range domain {
							params[k] = v
						}
						ev := tpl.NewEvaluator(params)
						if failed, err := ev.FailedRules(); err != nil || len(failed) > 0 || len(ev.CheckParameters()) > 0 {
							continue // a stack CloudFormation refuses before it starts a function
						}
						out = append(out, ev)
					}
				}
			}
		}
	}
	return out
}
