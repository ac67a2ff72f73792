package dataset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/hir-ads/hir/graph"
)

// Truth is the planted structure of a synthetic world, as in truth.json.
type Truth struct {
	Options     SynthOptions `json:"options"`       // with defaults applied
	StartMS     int64        `json:"start_ms"`      // window start, unix ms
	EndMS       int64        `json:"end_ms"`        // window end (exclusive)
	ColdStartMS int64        `json:"cold_start_ms"` // arrivals at or after this are cold
	// MidParent[m] is the coarse interest of mid interest m; FineParent[f] the
	// mid interest of fine interest f.
	MidParent  []int `json:"mid_parent"`
	FineParent []int `json:"fine_parent"`
	// Vocab holds each interest's words, per level.
	Vocab TruthVocab `json:"vocab"`
	// Names holds each interest's name, per level: "sports", "running",
	// "trail running" (the built-in taxonomy's; an interest beyond it is
	// named by its first made-up word).
	Names    TruthNames    `json:"names"`
	Entities []TruthEntity `json:"entities"`
}

// TruthVocab holds the words of each interest at each level.
type TruthVocab struct {
	Coarse [][]string `json:"coarse"`
	Mid    [][]string `json:"mid"`
	Fine   [][]string `json:"fine"`
}

// TruthNames holds the name of each interest at each level.
type TruthNames struct {
	Coarse []string `json:"coarse"`
	Mid    []string `json:"mid"`
	Fine   []string `json:"fine"`
}

// TruthEntity is one entity's planted interests. Fine is -1 for categories
// (which serve a mid interest); for users Fine, Mid and Coarse are those of the
// dominant interest and Interests lists all of them. ArrivalMS is when the
// entity first takes part in events (structure or engagement); Cold reports
// an arrival in the cold-start window.
type TruthEntity struct {
	Type      graph.NodeType  `json:"type"`
	ID        string          `json:"id"`
	Fine      int             `json:"fine"`
	Mid       int             `json:"mid"`
	Coarse    int             `json:"coarse"`
	Interests []TruthInterest `json:"interests,omitempty"`
	ArrivalMS int64           `json:"arrival_ms"`
	Cold      bool            `json:"cold"`
}

// TruthInterest is one weighted interest of a user.
type TruthInterest struct {
	Fine   int     `json:"fine"`
	Mid    int     `json:"mid"`
	Coarse int     `json:"coarse"`
	Weight float32 `json:"weight"`
}

// ReadTruth reads a truth.json written by Synth.
func ReadTruth(path string) (*Truth, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open truth: %w", err)
	}
	defer f.Close()
	var t Truth
	if err := json.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&t); err != nil {
		return nil, fmt.Errorf("decode truth %s: %w", path, err)
	}
	return &t, nil
}

// writeTruth writes truth.json by hand (one entity per line), in a layout
// that decodes into Truth.
func (w *world) writeTruth(bw *bufio.Writer) error {
	opts, err := json.Marshal(w.o)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 1<<16)
	b = append(b, `{"options":`...)
	b = append(b, opts...)
	b = append(b, ",\n"+`"start_ms":`...)
	b = strconv.AppendInt(b, w.startMS, 10)
	b = append(b, `,"end_ms":`...)
	b = strconv.AppendInt(b, w.endMS, 10)
	b = append(b, `,"cold_start_ms":`...)
	b = strconv.AppendInt(b, w.coldMS, 10)
	b = append(b, ",\n"+`"mid_parent":`...)
	b = appendInts(b, w.midParent)
	b = append(b, ",\n"+`"fine_parent":`...)
	b = appendInts(b, w.fineParent)
	b = append(b, ",\n"+`"vocab":{"coarse":`...)
	b = appendWordLists(b, w.vocabCoarse)
	b = append(b, ",\n"+`"mid":`...)
	b = appendWordLists(b, w.vocabMid)
	b = append(b, ",\n"+`"fine":`...)
	b = appendWordLists(b, w.vocabFine)
	b = append(b, "},\n"+`"names":{"coarse":`...)
	b = appendStrings(b, w.nameCoarse)
	b = append(b, ",\n"+`"mid":`...)
	b = appendStrings(b, w.nameMid)
	b = append(b, ",\n"+`"fine":`...)
	b = appendStrings(b, w.nameFine)
	b = append(b, "},\n"+`"entities":[`...)
	first := true
	flush := func() error {
		if len(b) < 1<<16 {
			return nil
		}
		_, err := bw.Write(b)
		b = b[:0]
		return err
	}
	ent := func(t graph.NodeType, idx int, fine, mid int32, arrival int64, interests func([]byte) []byte) error {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, "\n"+`{"type":"`...)
		b = append(b, t.String()...)
		b = append(b, `","id":"`...)
		b = append(b, synthPrefix[t]...)
		b = strconv.AppendInt(b, int64(idx), 10)
		b = append(b, `","fine":`...)
		b = strconv.AppendInt(b, int64(fine), 10)
		b = append(b, `,"mid":`...)
		b = strconv.AppendInt(b, int64(mid), 10)
		b = append(b, `,"coarse":`...)
		b = strconv.AppendInt(b, int64(w.midParent[mid]), 10)
		if interests != nil {
			b = interests(b)
		}
		b = append(b, `,"arrival_ms":`...)
		b = strconv.AppendInt(b, arrival, 10)
		b = append(b, `,"cold":`...)
		b = strconv.AppendBool(b, arrival >= w.coldMS)
		b = append(b, '}')
		return flush()
	}
	for m := range w.o.Mid {
		if err := ent(graph.NodeCategory, m, -1, int32(m), w.startMS, nil); err != nil {
			return err
		}
	}
	for a, f := range w.advFine {
		for _, t := range []graph.NodeType{graph.NodeAdvertiser, graph.NodeBrand, graph.NodePixel} {
			if err := ent(t, a, f, w.fineParent[f], w.advArrival[a], nil); err != nil {
				return err
			}
		}
	}
	for c, f := range w.campFine {
		if err := ent(graph.NodeCampaign, c, f, w.fineParent[f], w.campArrival[c], nil); err != nil {
			return err
		}
	}
	for p := range w.prodCamp {
		f := w.prodFine(int32(p))
		if err := ent(graph.NodeProduct, p, f, w.fineParent[f], w.prodArrival[p], nil); err != nil {
			return err
		}
	}
	for ad := range w.adCamp {
		f := w.adFine(int32(ad))
		if err := ent(graph.NodeAd, ad, f, w.fineParent[f], w.adArrival[ad], nil); err != nil {
			return err
		}
	}
	for u := range w.o.Users {
		fines := w.userFine[w.userStart[u]:w.userStart[u+1]]
		weights := w.userW[w.userStart[u]:w.userStart[u+1]]
		interests := func(b []byte) []byte {
			b = append(b, `,"interests":[`...)
			for i, f := range fines {
				if i > 0 {
					b = append(b, ',')
				}
				m := w.fineParent[f]
				b = append(b, `{"fine":`...)
				b = strconv.AppendInt(b, int64(f), 10)
				b = append(b, `,"mid":`...)
				b = strconv.AppendInt(b, int64(m), 10)
				b = append(b, `,"coarse":`...)
				b = strconv.AppendInt(b, int64(w.midParent[m]), 10)
				b = append(b, `,"weight":`...)
				b = strconv.AppendFloat(b, float64(weights[i]), 'g', -1, 32)
				b = append(b, '}')
			}
			return append(b, ']')
		}
		if err := ent(graph.NodeUser, u, fines[0], w.fineParent[fines[0]], w.userArrival[u], interests); err != nil {
			return err
		}
	}
	b = append(b, "\n]}\n"...)
	_, err = bw.Write(b)
	return err
}

func appendInts(b []byte, v []int32) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

func appendWordLists(b []byte, v [][]string) []byte {
	b = append(b, '[')
	for i, words := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStrings(b, words)
	}
	return append(b, ']')
}

// appendStrings appends words as a JSON array of strings.
func appendStrings(b []byte, words []string) []byte {
	b = append(b, '[')
	for j, s := range words {
		if j > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}
