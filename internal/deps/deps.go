package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-json-experiment/json"
	_ "github.com/go-json-experiment/json/jsontext"
	_ "github.com/goccy/go-yaml"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/open-policy-agent/opa/v1/rego"
	_ "github.com/open-policy-agent/opa/v1/tester"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
)

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
)

import (
	_ "github.com/coreos/go-oidc/v3/oidc"
	_ "github.com/go-jose/go-jose/v4"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/zitadel/oidc/v3/pkg/op"
	_ "go.etcd.io/bbolt"
)
