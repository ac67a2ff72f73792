package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// synthWorld is a small planted-interest graph: every ad belongs to one of
// `interests` coarse interests (its text uses that interest's words); users
// click ads of their own interest and mark some other ads not_interested.
type synthWorld struct {
	store   *graph.Store
	adTopic []int          // planted coarse interest of ad i
	ads     []graph.NodeID // ad i
	users   []graph.NodeID
}

var topicWords = [][]string{
	{"running", "shoes", "marathon", "sneaker", "trail", "jogging"},
	{"espresso", "coffee", "grinder", "barista", "latte", "beans"},
	{"guitar", "amplifier", "strings", "pedal", "chord", "acoustic"},
	{"tent", "camping", "sleeping", "backpack", "hiking", "lantern"},
	{"lipstick", "mascara", "skincare", "serum", "makeup", "blush"},
	{"drone", "camera", "lens", "tripod", "gimbal", "photo"},
}

func newSynthWorld(t testing.TB, users, ads, interests, eventsPerUser int, seed uint64) *synthWorld {
	t.Helper()
	if interests > len(topicWords) {
		t.Fatalf("at most %d interests", len(topicWords))
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	s := graph.NewStore(graph.Options{})
	w := &synthWorld{store: s}
	filler := []string{"new", "best", "sale", "great", "quality", "premium", "classic", "daily"}
	byTopic := make([][]int, interests)
	for i := range ads {
		topic := i % interests
		words := topicWords[topic]
		text := fmt.Sprintf("%s %s %s %s", words[rng.IntN(len(words))], filler[rng.IntN(len(filler))],
			words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		id, err := s.UpsertEntity(graph.Entity{Type: graph.NodeAd, ID: fmt.Sprintf("ad%d", i), Text: text,
			Attrs: map[string]string{"format": []string{"video", "image"}[rng.IntN(2)]}})
		if err != nil {
			t.Fatal(err)
		}
		w.ads = append(w.ads, id)
		w.adTopic = append(w.adTopic, topic)
		byTopic[topic] = append(byTopic[topic], i)
		camp := graph.Ref{Type: graph.NodeCampaign, ID: fmt.Sprintf("c%d-%d", topic, i%3)}
		if _, err := s.AddEvent(graph.Event{Src: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("ad%d", i)}, Dst: camp,
			Type: graph.EdgeInCampaign, TS: 1_000, Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	const day = 24 * 3600 * 1000
	t0 := int64(1_700_000_000_000)
	for u := range users {
		topic := u % interests
		uid, err := s.UpsertEntity(graph.Entity{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", u)})
		if err != nil {
			t.Fatal(err)
		}
		w.users = append(w.users, uid)
		for e := range eventsPerUser {
			ts := t0 + int64(rng.IntN(30*day))
			var ad int
			typ := graph.EdgeClick
			switch r := rng.Float64(); {
			case r < 0.85:
				ad = byTopic[topic][rng.IntN(len(byTopic[topic]))]
				if e%4 == 3 {
					typ = graph.EdgePurchase
				}
			default:
				other := (topic + 1 + rng.IntN(interests-1)) % interests
				ad = byTopic[other][rng.IntN(len(byTopic[other]))]
				typ = graph.EdgeNotInterested
			}
			if _, err := s.AddEvent(graph.Event{Src: graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", u)},
				Dst: graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("ad%d", ad)}, Type: typ, TS: ts, Weight: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

// tinyConfig is a model small enough for unit tests on a shared 2-core machine.
func tinyConfig() TrainConfig {
	var c TrainConfig
	c.Model = Config{Dim: 16, Heads: 2, Layers: 1, FFNDim: 32, EmbedDim: 16, HashK: 8, HashDim: 16,
		TextBkts: 512, TextLen: 8, AttrBkts: 64, AttrLen: 4, VectorDim: 4, Prototypes: []int{4, 8, 16}}
	c.Sampler.Teacher = graph.ViewOptions{MaxNodes: 8, Hops: 2}
	c.Sampler.Student = graph.ViewOptions{MaxNodes: 4, Hops: 1}
	c.Pairs = 8
	c.Steps = 6
	c.EvalEvery = 3
	c.LogEvery = 3
	return c
}
