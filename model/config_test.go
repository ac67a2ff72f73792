package model

import (
	"errors"
	"math"
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
		{"negative spectral weight", func(c *Config) { c.SpectralWeight = -1 }, false},
		{"infinite spectral weight", func(c *Config) { c.SpectralWeight = math.Inf(1) }, false},
		{"NaN spectral weight", func(c *Config) { c.SpectralWeight = math.NaN() }, false},
		{"no factors, no weight", func(c *Config) { c.Spectral, c.SpectralWeight = -1, -1 }, true},
		{"content in the factors", func(c *Config) { c.SpectralContent = 0.5 }, true},
		{"NaN content weight", func(c *Config) { c.SpectralContent = math.NaN() }, false},
		{"infinite content weight", func(c *Config) { c.SpectralContent = math.Inf(1) }, false},
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
