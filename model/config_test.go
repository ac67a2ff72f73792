package model

import (
	"errors"
	"testing"

	"github.com/hir-ads/hir/graph"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"features off", func(c *Config) { c.History, c.Spectral, c.Activity, c.IDRows = -1, -1, -1, -1 }, true},
		{"widest spectral", func(c *Config) { c.Spectral = maxSpectral }, true},
		{"spectral too wide", func(c *Config) { c.Spectral = maxSpectral + 1 }, false},
		{"history too long", func(c *Config) { c.History = graph.MaxHistory + 1 }, false},
		{"heads do not divide dim", func(c *Config) { c.Heads = 5 }, false},
		{"one prototype", func(c *Config) { c.Prototypes = []int{1} }, false},
		{"momentum 1", func(c *Config) { c.ProtoMomentum = 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.WithDefaults().Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadConfig)) {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSpectralSkipInit checks that the map of the spectral factors into the
// embedding starts as the identity on the first coordinates.
func TestSpectralSkipInit(t *testing.T) {
	for _, tc := range []struct{ spectral, embed int }{{4, 16}, {16, 16}, {64, 16}} {
		c := DefaultConfig()
		c.Spectral, c.EmbedDim = tc.spectral, tc.embed
		w := spectralSkipInit(c)
		if len(w) != tc.spectral {
			t.Fatalf("%+v: %d rows, want %d", tc, len(w), tc.spectral)
		}
		for j, row := range w {
			for i, v := range row {
				if want := float32(0); (i == j && v != 1) || (i != j && v != want) || len(row) != tc.embed {
					t.Fatalf("%+v: factor %d to coordinate %d = %v", tc, j, i, v)
				}
			}
		}
	}
}
