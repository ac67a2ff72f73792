package graph

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckEndpoints (issue 48, defect 4): the events of the data sets
// pass, and an event whose endpoint types its edge type does not join is
// refused, naming the event's rule and the allowed ones.
func TestCheckEndpoints(t *testing.T) {
	ev := func(src NodeType, et EdgeType, dst NodeType) Event {
		return Event{Src: Ref{src, "s"}, Dst: Ref{dst, "d"}, Type: et, TS: 1}
	}
	for _, tc := range []struct {
		name string
		ev   Event
		want string // "" allowed, else a substring of the error
	}{
		{"click user->ad", ev(NodeUser, EdgeClick, NodeAd), ""},
		{"purchase user->product", ev(NodeUser, EdgePurchase, NodeProduct), ""},
		{"not_interested user->ad", ev(NodeUser, EdgeNotInterested, NodeAd), ""},
		{"in_campaign ad->campaign", ev(NodeAd, EdgeInCampaign, NodeCampaign), ""},
		{"of_advertiser campaign->advertiser", ev(NodeCampaign, EdgeOfAdvertiser, NodeAdvertiser), ""},
		{"of_advertiser pixel->advertiser", ev(NodePixel, EdgeOfAdvertiser, NodeAdvertiser), ""},
		{"promotes ad->product", ev(NodeAd, EdgePromotes, NodeProduct), ""},
		{"in_category product->category", ev(NodeProduct, EdgeInCategory, NodeCategory), ""},
		{"of_brand ad->brand", ev(NodeAd, EdgeOfBrand, NodeBrand), ""},
		{"fires user->pixel", ev(NodeUser, EdgeFires, NodePixel), ""},
		// The probe's cases.
		{"click ad->user", ev(NodeAd, EdgeClick, NodeUser), "click from ad to user; click goes user -> ad or user -> product"},
		{"in_campaign user->ad", ev(NodeUser, EdgeInCampaign, NodeAd), "in_campaign from user to ad; in_campaign goes ad -> campaign"},
		{"purchase user->user", ev(NodeUser, EdgePurchase, NodeUser), "purchase from user to user"},
		{"of_advertiser campaign->campaign", ev(NodeCampaign, EdgeOfAdvertiser, NodeCampaign), "of_advertiser goes campaign -> advertiser or pixel -> advertiser"},
		{"click user->pixel", ev(NodeUser, EdgeClick, NodePixel), "click from user to pixel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ev.CheckEndpoints()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrEdgeNotAllowed) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error = %v, want ErrEdgeNotAllowed with %q", err, tc.want)
			}
		})
	}
	for _, r := range EdgeRules() {
		if r.Src == r.Dst {
			t.Errorf("rule %s joins a type to itself", r)
		}
	}
}

// TestNormalizeID (issue 48, defect 5): the NFC and NFD spellings of an id
// become one id; control and format characters and invalid UTF-8 are
// refused.
func TestNormalizeID(t *testing.T) {
	const nfc, nfd = "Zo\u00eb-caf\u00e9", "Zoe\u0308-cafe\u0301"
	for _, tc := range []struct {
		name, id, want, err string
	}{
		{"ascii", "u1", "u1", ""},
		{"NFC", nfc, nfc, ""},
		{"NFD becomes NFC", nfd, nfc, ""},
		{"CJK", "用户-42", "用户-42", ""},
		{"NUL", "u\x001", "", "control character U+0000"},
		{"LF", "u\n1", "", "control character U+000A"},
		{"ESC", "u\x1b[31m", "", "control character U+001B"},
		{"DEL", "u\x7f", "", "control character U+007F"},
		{"C1", "u\u0085", "", "control character U+0085"},
		{"bidi override", "u\u202e1", "", "format character U+202E"},
		{"zero-width space", "u\u200b1", "", "format character U+200B"},
		{"byte order mark", "\ufeffu1", "", "format character U+FEFF"},
		{"invalid UTF-8", "u\xff", "", "not valid UTF-8"},
		{"replacement character", "u\ufffd", "", "not valid UTF-8"},
		{"too long once normalized", strings.Repeat("\u0958", 43), "", "exceed the limit of 256"}, // 129 bytes, NFC 258
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeID(tc.id)
			if tc.err != "" {
				if !errors.Is(err, ErrBadID) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("NormalizeID(%q) = %q, %v; want ErrBadID with %q", tc.id, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("NormalizeID(%q) = %q, %v; want %q", tc.id, got, err, tc.want)
			}
		})
	}
}
