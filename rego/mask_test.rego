package system.log_test

import data.system.log

event := {"input": {
	"message": {"method": "tools/call", "name": "create_booking", "arguments": {"note": "BAIT-ARG", "api_token": "BAIT-TOKEN"}, "uri": "crm://acme/customers/1"},
	"principal": {"authenticated": true, "subject": "alice", "credential_kind": "oauth", "credential_id": "jti-1", "token_rights": ["a"], "session_token": "BAIT-SESSION"},
	"tool": {"name": "create_booking", "catalog": {"annotations": {"x-secret": "BAIT-ANN"}}},
}}

test_masks_arguments_and_credentials if {
	m := log.mask with input as event
	"/input/message/arguments" in m
	"/input/message/uri" in m
	"/input/principal/credential_id" in m
	"/input/principal/session_token" in m
	"/input/tool/catalog/annotations/x-secret" in m
}

test_keeps_public_fields if {
	m := log.mask with input as event
	not "/input/principal/credential_kind" in m
	not "/input/principal/token_rights" in m
	not "/input/message/name" in m
	not "/input/message/arguments/api_token" in m # covered by its parent
}
