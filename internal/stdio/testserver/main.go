// Command testserver is a stdio MCP server built with the official Go
// SDK's stdio transport, for the tests of stdio upstreams. Its tools:
// echo (read), progress (emits progress notifications), ask (asks the
// client by elicitation), crash (exits mid-call), big (answers with a
// 2 MiB text, a single 2 MiB line on standard output), record (a write:
// counts records in a file named by -records), add_tool (adds a tool, so
// tools/list_changed follows) and pid (its process id).
// Flags switch on faults: -exit-before-init, -hang-init, -stderr-flood,
// -ignore-eof (survives the end of its standard input and SIGTERM), and
// -grandchild (starts a long sleep in its process group).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text    string `json:"text"`
	SleepMS int    `json:"sleep_ms,omitempty"`
}

type textOut struct {
	Text string `json:"text"`
}

type recordIn struct {
	Note string `json:"note"`
}

type empty struct{}

func main() {
	exitBeforeInit := flag.Bool("exit-before-init", false, "exit with status 2 before reading anything")
	hangInit := flag.Bool("hang-init", false, "never answer initialize")
	flood := flag.Int("stderr-flood", 0, "lines to write to standard error at start, then one every millisecond while running")
	ignoreEOF := flag.Bool("ignore-eof", false, "keep running after standard input ends, and ignore SIGTERM")
	grandchild := flag.Bool("grandchild", false, "start a long sleep in the process group")
	records := flag.String("records", "", "file the record tool appends to")
	escaped := flag.String("escaped-grandchild", "", "start a long sleep in a session of its own that holds standard error open, and write its process id to this file")
	flag.Parse()

	if *exitBeforeInit {
		fmt.Fprintln(os.Stderr, "testserver: exiting before initialize")
		os.Exit(2)
	}
	if *ignoreEOF {
		signal.Ignore(syscall.SIGTERM)
	}
	if *grandchild {
		_ = exec.Command("sleep", "1000").Start()
	}
	if *escaped != "" {
		sleep := exec.Command("sleep", "1000")
		sleep.Stderr = os.Stderr
		sleep.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := sleep.Start(); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(*escaped, []byte(strconv.Itoa(sleep.Process.Pid)), 0o600); err != nil {
			log.Fatal(err)
		}
	}
	if *flood > 0 {
		go func() {
			line := strings.Repeat("x", 100)
			for i := 0; i < *flood; i++ {
				fmt.Fprintf(os.Stderr, "flood %d %s\n", i, line)
			}
			for i := 0; ; i++ {
				fmt.Fprintf(os.Stderr, "tick %d\n", i)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	if *hangInit {
		select {}
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpgate-stdio-testserver", Version: "1"}, &mcp.ServerOptions{Instructions: "A test server."})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes text, optionally after a pause."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, textOut, error) {
			select {
			case <-time.After(time.Duration(in.SleepMS) * time.Millisecond):
			case <-ctx.Done():
				return nil, textOut{}, ctx.Err()
			}
			return nil, textOut{Text: in.Text}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", Description: "Reports progress three times, then answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, textOut, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 3 && tok != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, textOut{}, err
				}
			}
			return nil, textOut{Text: "done"}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Asks the user for a name by elicitation."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, textOut, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, textOut{}, nil
			}
			return nil, textOut{Text: fmt.Sprintf("%s: %v", res.Action, res.Content["name"])}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exits with status 3 before answering."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, textOut, error) {
			os.Exit(3)
			return nil, textOut{}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Answers with 2 MiB of text."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("a", 2<<20)}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "record", Description: "Records a note (a write), then exits if the note starts with \"crash\"."},
		func(_ context.Context, _ *mcp.CallToolRequest, in recordIn) (*mcp.CallToolResult, textOut, error) {
			if *records != "" {
				f, err := os.OpenFile(*records, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return nil, textOut{}, err
				}
				fmt.Fprintln(f, in.Note)
				f.Close()
			}
			if strings.HasPrefix(in.Note, "crash") {
				os.Exit(3)
			}
			return nil, textOut{Text: "recorded"}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "add_tool", Description: "Adds a tool named after its text (tools/list_changed follows)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, textOut, error) {
			mcp.AddTool(srv, &mcp.Tool{Name: in.Text, Description: "Added."},
				func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, textOut, error) {
					return nil, textOut{Text: "added"}, nil
				})
			return nil, textOut{Text: "ok"}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pid", Description: "Answers with its process id."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: fmt.Sprint(os.Getpid())}, nil
		})
	err := srv.Run(context.Background(), &mcp.StdioTransport{MaxLineLength: -1})
	if *ignoreEOF {
		fmt.Fprintln(os.Stderr, "testserver: standard input ended; staying")
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}
