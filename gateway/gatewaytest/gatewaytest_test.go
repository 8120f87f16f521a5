package gatewaytest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
)

func TestWithSetsOnlyNonZeroFields(t *testing.T) {
	var c config
	c.opts = gateway.Options{MaxBodyBytes: MaxBodyBytes, MaxJSONDepth: MaxJSONDepth, TenantHeader: "x-a"}
	With(gateway.Options{MaxJSONDepth: 64, StripHeaders: []string{"x-b"}})(&c)
	if c.opts.MaxBodyBytes != MaxBodyBytes || c.opts.MaxJSONDepth != 64 || c.opts.TenantHeader != "x-a" || len(c.opts.StripHeaders) != 1 {
		t.Errorf("merged options: %+v", c.opts)
	}
}

func TestWritesAndTasksShareTheStore(t *testing.T) {
	st := Store(t)
	p := New(t, WithStore(st), WithWrites(func(w *gateway.WriteSafety) { w.ConfirmTTL = 1 }), WithTasks(5))
	o := p.Options()
	if o.Writes == nil || o.Writes.Replays != st || o.Writes.WaitInFlight != WaitInFlight || o.Writes.ConfirmTTL != 1 {
		t.Errorf("write safety: %+v", o.Writes)
	}
	if !o.Tasks.Enabled || o.Tasks.Store != st || o.Tasks.MaxTTL != 5 {
		t.Errorf("tasks: %+v", o.Tasks)
	}
	if o.MaxBodyBytes != MaxBodyBytes || o.MaxJSONDepth != MaxJSONDepth || o.MaxSSEEventBytes != MaxSSEEventBytes {
		t.Errorf("bounds: %d %d %d", o.MaxBodyBytes, o.MaxJSONDepth, o.MaxSSEEventBytes)
	}
}

// TestOnlyTestsImportIt: no file of the product imports this package.
func TestOnlyTestsImportIt(t *testing.T) {
	const self = "github.com/mcpgate/mcpgate/gateway/gatewaytest"
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "gatewaytest") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				t.Errorf("%s imports %s", path, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
