package index

import (
	"fmt"
	"strconv"
)

// Token is one Bag-of-Meaning interest token: a (level, code) pair packed into
// a uint32. The level occupies the top TokenLevelBits bits and the code the
// remaining TokenCodeBits bits. Levels 0..L-1 are the prototype levels (coarse
// to fine); levels L.. are the residual levels of a [Quantizer].
type Token uint32

const (
	// TokenLevelBits is the number of bits of a Token that hold its level.
	TokenLevelBits = 4
	// TokenCodeBits is the number of bits of a Token that hold its code.
	TokenCodeBits = 32 - TokenLevelBits
	// MaxTokenLevels is the number of distinct levels a Token can name.
	MaxTokenLevels = 1 << TokenLevelBits
	// MaxTokenCode is the largest code a Token can hold.
	MaxTokenCode = 1<<TokenCodeBits - 1
)

// MakeToken packs level and code into a Token. It reports false when either
// is out of range.
func MakeToken(level, code int) (Token, bool) {
	if level < 0 || level >= MaxTokenLevels || code < 0 || code > MaxTokenCode {
		return 0, false
	}
	return Token(uint32(level)<<TokenCodeBits | uint32(code)), true
}

// mustToken packs level and code; callers have validated the ranges.
func mustToken(level, code int) Token {
	t, ok := MakeToken(level, code)
	if !ok {
		panic(fmt.Sprintf("index: token (%d,%d) out of range", level, code))
	}
	return t
}

// Level returns the level of t.
func (t Token) Level() int { return int(uint32(t) >> TokenCodeBits) }

// Code returns the code of t within its level.
func (t Token) Code() int { return int(uint32(t) & MaxTokenCode) }

// String formats t as "L<level>:<code>", e.g. "L2:117".
func (t Token) String() string {
	return "L" + strconv.Itoa(t.Level()) + ":" + strconv.Itoa(t.Code())
}

// ParseToken parses the form written by [Token.String].
func ParseToken(s string) (Token, error) {
	var level, code int
	if _, err := fmt.Sscanf(s, "L%d:%d", &level, &code); err != nil {
		return 0, fmt.Errorf("parse token %q: %w", s, err)
	}
	t, ok := MakeToken(level, code)
	if !ok || t.String() != s {
		return 0, fmt.Errorf("parse token %q: out of range or not canonical", s)
	}
	return t, nil
}

// WeightedToken is a token of a bag together with its weight, the similarity
// of the bagged vector to the token's prototype (or residual codeword).
type WeightedToken struct {
	Token  Token   `json:"token"`
	Weight float32 `json:"weight"`
}

// MarshalText implements encoding.TextMarshaler.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Token) UnmarshalText(b []byte) error {
	v, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
