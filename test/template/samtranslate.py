#!/usr/bin/env python3
"""Runs the SAM transform (aws-sam-translator, the library `sam deploy` and CloudFormation use)
over template.yaml offline and prints the CloudFormation template it produces, as JSON.

Every function's CodeUri is first replaced by an s3:// URI, as `sam package` does, so the
transform sees what CloudFormation would. No AWS credentials are needed: the managed-policy
loader is a stub, because the template names no managed policy (every policy is an inline
document, which test/template checks); a name lookup fails loudly instead of calling IAM.

Usage: samtranslate.py [template.yaml]   (exit status 1 with the translator's message on error)
"""

import json
import os
import sys

# The transform reads the region for its pseudo parameters from boto's session; any region
# does (no call is made), and an operator's own AWS settings must not change the result.
os.environ["AWS_DEFAULT_REGION"] = "eu-west-1"
os.environ.pop("AWS_REGION", None)
os.environ.pop("AWS_PROFILE", None)

try:
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse
except ImportError as e:  # the machine image preinstalls it; say what is missing
    sys.exit(f"samtranslate: {e}: install aws-sam-translator (pip install aws-sam-translator==1.110.0)")


class NoManagedPolicies:
    """Managed-policy loader that refuses to be used (the real one lists IAM's policies)."""

    def load(self):
        raise RuntimeError("the template names a managed policy; use an inline policy document")


def package(template):
    """Sets every function's CodeUri to an S3 URI, the way `sam package` rewrites a local path."""
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::Serverless::Function":
            props = resource.setdefault("Properties", {})
            if "InlineCode" not in props:
                props["CodeUri"] = f"s3://authserver-artifacts/authserver/{logical_id}.zip"
    return template


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    with open(path, encoding="utf-8") as f:
        template = package(yaml_parse(f.read()))
    try:
        out = transform(template, {}, NoManagedPolicies())
    except InvalidDocumentException as e:
        causes = "; ".join(str(c) for c in e.causes)
        sys.exit(f"samtranslate: {path}: {causes}")
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
