package deps
import (
 _ "github.com/go-json-experiment/json/jsontext"
 _ "github.com/go-json-experiment/json"
 _ "github.com/modelcontextprotocol/go-sdk/mcp"
 _ "github.com/open-policy-agent/opa/v1/rego"
 _ "github.com/open-policy-agent/opa/v1/tester"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/prometheus/client_golang/prometheus/promhttp"
 _ "github.com/santhosh-tekuri/jsonschema/v6"
 _ "github.com/goccy/go-yaml"
 _ "github.com/fsnotify/fsnotify"
)
