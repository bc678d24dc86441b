package format

import (
	"fmt"
	"io"

	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// MaxTokens bounds the YAML tokens of a scenario file. The parser's cost
// grows with the tokens it holds (about 2.5 µs and 1 KiB each, measured on
// 1 MiB files of half a million tokens); at 2^17 a file parses in well
// under a second. A realistic file holds a few thousand (tp8-shared-expert:
// under 600); a program of MaxOps ops in flow style about 60,000.
const MaxTokens = 1 << 17

// scanLimits is the loader's front end: before the YAML parser sees data,
// it runs the parser's own tokenizer (goccy/go-yaml's scanner: one pass
// over the file, in time and memory linear in its length, which
// MaxFileBytes bounds; it hands back a document's tokens in one batch) and
// walks the tokens, stopping at the first that crosses a limit the parser's
// cost depends on:
//
//   - nesting: open flow collections ([ ], { }) plus open block levels
//     (each deeper indentation of a sequence entry "-", a key "?" or a key
//     before ":") — at most MaxDepth; the parser takes time quadratic in
//     it (64,000 levels of "- - - … x" took about a minute and 6 GB);
//   - tokens: at most MaxTokens.
//
// Because it is the same tokenizer the parser uses, it agrees with the
// parser on what is a quote, a comment or a block scalar: an apostrophe in
// a plain scalar, an unbalanced quote or forty "[" inside a "description:
// |" block are text, as they are to the parser. A byte-level scan cannot
// know that without re-implementing the tokenizer, and the one this
// replaced did not (see yamlscan_test.go).
//
// Candidates measured (1 MiB and 64,000-level inputs, one core): this
// scanner, linear (2 ms for 16,000 levels, 10 ms for 64,000; 0.03–0.9 s
// and at most about 150 MB for 1 MiB, depending on token count); go.yaml.in/yaml/v3 parsing as a
// pre-pass, also linear with its own depth limit of 10,000 but a second
// grammar that can disagree with the parser on what a file means, and no
// token-level limit below the parser's quadratic range; goccy's parser
// alone, quadratic (94 ms at 8,000 levels, 273 ms at 16,000). Syntax
// errors are left to the parser, which names them.
func scanLimits(data []byte) (Pos, string, bool) {
	var s scanner.Scanner
	s.Init(string(data))
	flow := 0
	var block []int // columns of the open block levels, increasing
	var prev *token.Token
	tokens := 0
	// Scan consumes at least one character per call; the bound guards
	// against a scanner that would not.
	for calls := 0; calls <= len(data)+1; calls++ {
		toks, err := s.Scan()
		if err == io.EOF {
			return Pos{}, "", true
		}
		for _, tk := range toks {
			if tk == nil || tk.Position == nil {
				continue
			}
			tokens++
			at := Pos{tk.Position.Line, tk.Position.Column}
			if tokens > MaxTokens {
				return at, fmt.Sprintf("more than %d YAML tokens; write a smaller file", MaxTokens), false
			}
			col := -1 // the column of a block level this token opens or continues
			switch tk.Type {
			case token.SequenceStartType, token.MappingStartType:
				flow++
			case token.SequenceEndType, token.MappingEndType:
				flow = max(flow-1, 0)
			case token.SequenceEntryType, token.MappingKeyType:
				if flow == 0 {
					col = tk.Position.Column
				}
			case token.MappingValueType:
				if flow == 0 && prev != nil && prev.Position != nil && prev.Position.Line == tk.Position.Line {
					col, at = prev.Position.Column, Pos{prev.Position.Line, prev.Position.Column}
				}
			}
			if col > 0 {
				for len(block) > 0 && block[len(block)-1] > col {
					block = block[:len(block)-1]
				}
				if len(block) == 0 || block[len(block)-1] < col {
					block = append(block, col)
				}
			}
			if d := flow + len(block); d > MaxDepth {
				return at, fmt.Sprintf("nesting deeper than %d levels (indented blocks and [ ] { } together); flatten the file", MaxDepth), false
			}
			prev = tk
		}
	}
	return Pos{1, 1}, "the YAML tokenizer made no progress", false
}
