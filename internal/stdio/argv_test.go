package stdio

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{name: "plain words", in: "npx -y @modelcontextprotocol/server-everything", want: []string{"npx", "-y", "@modelcontextprotocol/server-everything"}},
		{name: "blanks", in: "  a \t b  ", want: []string{"a", "b"}},
		{name: "single quotes", in: `echo 'a b $x "c"'`, want: []string{"echo", `a b $x "c"`}},
		{name: "double quotes", in: `echo "a 'b' \"c\" \\ \$"`, want: []string{"echo", `a 'b' "c" \ $`}},
		{name: "adjacent quotes", in: `a'b'"c"d`, want: []string{"abcd"}},
		{name: "empty quoted word", in: `a ''`, want: []string{"a", ""}},
		{name: "backslash", in: `a\ b c\*`, want: []string{"a b", "c*"}},
		{name: "tilde inside a word", in: "echo a=~b x#y", want: []string{"echo", "a=~b", "x#y"}},
		{name: "variable", in: "echo $HOME", err: `'$'`},
		{name: "variable in double quotes", in: `echo "$HOME"`, err: "double quotes"},
		{name: "command substitution", in: "echo `id`", err: "'`'"},
		{name: "glob", in: "ls *.go", err: "'*'"},
		{name: "pipe", in: "a | b", err: "'|'"},
		{name: "sequence", in: "a; b", err: "';'"},
		{name: "redirect", in: "a > f", err: "'>'"},
		{name: "tilde", in: "cat ~/x", err: "'~'"},
		{name: "comment", in: "a #b", err: "'#'"},
		{name: "unterminated single", in: "a 'b", err: "unterminated single quote"},
		{name: "unterminated double", in: `a "b`, err: "unterminated double quote"},
		{name: "trailing backslash", in: `a \`, err: "backslash"},
		{name: "line break", in: "a\nb", err: "line break"},
		{name: "escaped line break", in: "a\\\nb", err: "line break"},
		{name: "escaped line break in double quotes", in: "a \"b\\\nc\"", err: "line break"},
		{name: "assignment", in: "TOKEN=x npx server", err: "upstreams[].command.env"},
		{name: "quoted assignment is a program", in: "'TOKEN=x' y", want: []string{"TOKEN=x", "y"}},
		{name: "assignment-like argument", in: "npx --token=x A=b", want: []string{"npx", "--token=x", "A=b"}},
		{name: "empty", in: "  ", err: "no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitCommand(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("SplitCommand(%q) = %q, %v; want error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("SplitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func FuzzSplitCommand(f *testing.F) {
	f.Add(`npx -y "@a/b c" 'd e' f\ g`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitCommand(s)
		if err != nil {
			return
		}
		if len(words) == 0 {
			t.Fatal("no words without an error")
		}
		// Joining the words and splitting again gives the same words.
		again, err := SplitCommand(JoinCommand(words))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q → %q → %q (%v)", s, words, again, err)
		}
	})
}

func TestJoinCommand(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything"}, "npx -y @modelcontextprotocol/server-everything"},
		{[]string{"sh", "-c", "echo $HOME; it's"}, `sh -c 'echo $HOME; it'\''s'`},
		{[]string{"a", "", "~/x", "#c", "TOKEN=x"}, `a '' '~/x' '#c' TOKEN=x`},
		{[]string{"A=", "b"}, `'A=' b`},
	} {
		got := JoinCommand(tc.argv)
		if got != tc.want {
			t.Errorf("JoinCommand(%q) = %s, want %s", tc.argv, got, tc.want)
		}
		if again, err := SplitCommand(got); err != nil || !slices.Equal(again, tc.argv) {
			t.Errorf("SplitCommand(%s) = %q, %v; want %q", got, again, err, tc.argv)
		}
	}
}
