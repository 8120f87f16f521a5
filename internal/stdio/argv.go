package stdio

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// SplitCommand splits a command line into its words the way a POSIX shell
// splits plain words: separated by blanks, with 'single quotes' (literal),
// "double quotes" (where only \" \\ \$ and \` escape) and backslash escapes
// outside quotes. What a shell would expand or interpret rather than pass
// on literally ($, `, globs *?[, ~ at the start of a word, |&;<>(){},
// # starting a comment, a leading NAME=value assignment, an unterminated
// quote, a line break) is refused with an error naming it: the result is
// never a guess.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	plain := true // the current word has no quote or escape so far
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord, plain = append(words, cur.String()), false, true
				cur.Reset()
			}
			continue
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch s[i] {
				case '\\':
					if i+1 < len(s) && (s[i+1] == '\n' || s[i+1] == '\r') {
						return nil, errors.New("a line break is not allowed; give one command")
					}
					if i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
						i++
					}
				case '$', '`':
					return nil, fmt.Errorf("%q inside double quotes would be expanded by a shell; quote it with single quotes", s[i])
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("a backslash at the end escapes nothing")
			}
			i++
			if s[i] == '\n' || s[i] == '\r' {
				return nil, errors.New("a line break is not allowed; give one command")
			}
			cur.WriteByte(s[i])
		case c == '\n' || c == '\r':
			return nil, errors.New("a line break is not allowed; give one command")
		case strings.IndexByte("$`*?[|&;<>(){}", c) >= 0, c == '~' && !inWord, c == '#' && !inWord:
			return nil, fmt.Errorf("%q would be interpreted by a shell; quote it, or use a configuration file with upstreams[].command.argv", c)
		case c == '=' && len(words) == 0 && plain && envNamePattern.MatchString(cur.String()):
			return nil, fmt.Errorf("%q would set an environment variable in a shell, not name the program; use a configuration file with upstreams[].command.env (or env_files for secrets)", cur.String()+"=")
		default:
			cur.WriteByte(c)
		}
		if c == '\'' || c == '"' || c == '\\' {
			plain = false
		}
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("no command")
	}
	return words, nil
}

// envNamePattern is a shell variable name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// JoinCommand is the command line that SplitCommand splits into argv:
// words of plain characters as they are, others (and a program whose name
// holds "=") in single quotes.
func JoinCommand(argv []string) string {
	var b strings.Builder
	for i, w := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		plain := w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == ""
		if plain && (i > 0 || !strings.Contains(w, "=")) { // a program named NAME=… is quoted
			b.WriteString(w)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(w, "'", `'\''`) + "'")
	}
	return b.String()
}
