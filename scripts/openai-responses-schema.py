#!/usr/bin/env python3
"""Extracts the Responses API's schemas from the official OpenAI OpenAPI document.

    scripts/openai-responses-schema.py OPENAPI_JSON > testdata/openai/responses.schema.json

The output is a JSON Schema (2019-09, for the $recursiveAnchor the document uses) whose $defs are the components the
roots below reach, unmodified except that an OpenAPI 3.0 `nullable: true`
node becomes `anyOf: [node, {"type": "null"}]` and $refs point into $defs.
runtime/service's tests validate requests, answers and stream events
against it.
"""
import json, sys

ROOTS = ["CreateResponse", "Response", "ResponseStreamEvent", "ErrorResponse"]

doc = json.load(open(sys.argv[1]))
schemas = doc["components"]["schemas"]
seen = {}

def walk(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref":
                name = v.split("/")[-1]
                out[k] = "#/$defs/" + name
                if name not in seen:
                    seen[name] = None
                    seen[name] = walk(schemas[name])
            else:
                out[k] = walk(v)
        if out.pop("nullable", False):
            out = {"anyOf": [out, {"type": "null"}]}
        return out
    if isinstance(node, list):
        return [walk(v) for v in node]
    return node

for r in ROOTS:
    seen[r] = None
    seen[r] = walk(schemas[r])
out = {"$schema": "https://json-schema.org/draft/2019-09/schema",
       "$comment": "Extracted from the official OpenAI OpenAPI document (info.version %s) by scripts/openai-responses-schema.py" % doc["info"]["version"],
       "$defs": dict(sorted(seen.items()))}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
