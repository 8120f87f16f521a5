package stdio

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a command line into its words the way a POSIX shell
// splits plain words: separated by blanks, with 'single quotes' (literal),
// "double quotes" (where only \" \\ \$ and \` escape) and backslash escapes
// outside quotes. What a shell would expand or interpret rather than pass
// on literally ($, `, globs *?[, ~ at the start of a word, |&;<>(){},
// # starting a comment, an unterminated quote, a line break) is refused
// with an error naming it: the result is never a guess.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
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
			cur.WriteByte(s[i])
		case c == '\n' || c == '\r':
			return nil, errors.New("a line break is not allowed; give one command")
		case strings.IndexByte("$`*?[|&;<>(){}", c) >= 0, c == '~' && !inWord, c == '#' && !inWord:
			return nil, fmt.Errorf("%q would be interpreted by a shell; quote it, or use a configuration file with upstreams[].command.argv", c)
		default:
			cur.WriteByte(c)
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
