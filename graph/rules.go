package graph

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Errors of the checks that the API edge and the importers apply on top of
// Validate.
var (
	// ErrEdgeNotAllowed is returned by [Event.CheckEndpoints] for an event
	// whose (source type, edge type, target type) is not in [EdgeRules].
	ErrEdgeNotAllowed = errors.New("edge not allowed")
	// ErrBadID is returned by [NormalizeID] for an id that holds a control
	// or format character or invalid UTF-8.
	ErrBadID = errors.New("bad id")
)

// EdgeRule is one allowed (source type, edge type, target type) of an event.
type EdgeRule struct {
	Src  NodeType
	Type EdgeType
	Dst  NodeType
}

func (r EdgeRule) String() string {
	return r.Src.String() + " -" + r.Type.String() + "-> " + r.Dst.String()
}

// engagementTargets are what a user engages with.
var engagementTargets = []NodeType{NodeAd, NodeProduct}

// edgeRules is the table of EdgeRules, indexed by edge type.
var edgeRules = func() [NumEdgeTypes][]EdgeRule {
	var t [NumEdgeTypes][]EdgeRule
	add := func(src NodeType, et EdgeType, dsts ...NodeType) {
		for _, d := range dsts {
			t[et] = append(t[et], EdgeRule{src, et, d})
		}
	}
	for et := EdgeImpression; et <= EdgeNotInterested; et++ {
		add(NodeUser, et, engagementTargets...)
	}
	add(NodeAd, EdgeInCampaign, NodeCampaign)
	add(NodeCampaign, EdgeOfAdvertiser, NodeAdvertiser)
	add(NodePixel, EdgeOfAdvertiser, NodeAdvertiser)
	add(NodeAd, EdgePromotes, NodeProduct)
	add(NodeAd, EdgeInCategory, NodeCategory)
	add(NodeProduct, EdgeInCategory, NodeCategory)
	add(NodeAd, EdgeOfBrand, NodeBrand)
	add(NodeProduct, EdgeOfBrand, NodeBrand)
	add(NodeUser, EdgeFires, NodePixel)
	return t
}()

// EdgeRules returns every allowed (source type, edge type, target type), in
// edge type order: engagement (impression ... not_interested) goes from a
// user to an ad or a product; in_campaign ad -> campaign; of_advertiser
// campaign or pixel -> advertiser; promotes ad -> product; in_category and
// of_brand ad or product -> category or brand; fires user -> pixel. No rule
// joins a node type to itself, so no event is a self-loop.
func EdgeRules() []EdgeRule {
	var out []EdgeRule
	for _, rs := range edgeRules {
		out = append(out, rs...)
	}
	return out
}

// CheckEndpoints reports whether ev's endpoint types are allowed for its
// edge type ([EdgeRules]); the error names the event's rule and the
// allowed ones. ev must be valid ([Event.Validate]). Stored logs may hold
// events from before the rules; replay does not apply them.
func (ev *Event) CheckEndpoints() error {
	if !ev.Type.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownEdgeType, ev.Type)
	}
	rules := edgeRules[ev.Type]
	for _, r := range rules {
		if r.Src == ev.Src.Type && r.Dst == ev.Dst.Type {
			return nil
		}
	}
	allowed := make([]string, len(rules))
	for i, r := range rules {
		allowed[i] = r.Src.String() + " -> " + r.Dst.String()
	}
	return fmt.Errorf("%w: %s from %s to %s; %s goes %s", ErrEdgeNotAllowed, ev.Type, ev.Src.Type, ev.Dst.Type,
		ev.Type, strings.Join(allowed, " or "))
}

// NormalizeID returns id in Unicode normalization form NFC, so that the
// composed and decomposed spellings of one id ("é" as one code point or as
// "e" and a combining accent) name one node. It refuses, with ErrBadID, an
// id that holds invalid UTF-8 or U+FFFD (what a JSON decoder puts in its
// place), a control character (C0, DEL, C1: NUL, LF, ESC, ...) or a format
// character (zero-width spaces and joiners, bidi overrides such as U+202E,
// the byte order mark): invisible characters that make look-alike ids. The
// length limit (MaxIDBytes) applies to the normalized id.
func NormalizeID(id string) (string, error) {
	for i, r := range id {
		switch {
		case r == utf8.RuneError:
			return "", fmt.Errorf("%w: not valid UTF-8 (or U+FFFD) at byte %d", ErrBadID, i)
		case unicode.IsControl(r):
			return "", fmt.Errorf("%w: control character %U at byte %d", ErrBadID, r, i)
		case unicode.Is(unicode.Cf, r):
			return "", fmt.Errorf("%w: invisible format character %U at byte %d", ErrBadID, r, i)
		}
	}
	id = norm.NFC.String(id)
	if len(id) > MaxIDBytes {
		return "", fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrBadID, len(id), MaxIDBytes)
	}
	return id, nil
}

// Normalize applies [NormalizeID] to the event's id and endpoint ids (an
// empty event id stays empty).
func (ev *Event) Normalize() error {
	var err error
	if ev.ID != "" {
		if ev.ID, err = NormalizeID(ev.ID); err != nil {
			return fmt.Errorf("id: %w", err)
		}
	}
	if ev.Src.ID, err = NormalizeID(ev.Src.ID); err != nil {
		return fmt.Errorf("src.id: %w", err)
	}
	if ev.Dst.ID, err = NormalizeID(ev.Dst.ID); err != nil {
		return fmt.Errorf("dst.id: %w", err)
	}
	return nil
}
