package model

import (
	"errors"
	"math"
	"os"
	"path/filepath"
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
		{"no profile factors", func(c *Config) { c.SpectralProfile = -1 }, true},
		{"NaN profile half-life", func(c *Config) { c.SpectralProfileDays = math.NaN() }, false},
		{"factors without decay", func(c *Config) { c.SpectralHalfLifeDays = -1 }, true},
		{"NaN factor half-life", func(c *Config) { c.SpectralHalfLifeDays = math.NaN() }, false},
		{"infinite factor half-life", func(c *Config) { c.SpectralHalfLifeDays = math.Inf(1) }, false},
		{"history too long", func(c *Config) { c.History = graph.MaxHistory + 1 }, false},
		{"shared activity", func(c *Config) { c.Activity = ActivityShared }, true},
		{"no such activity form", func(c *Config) { c.Activity = ActivityTyped + 1 }, false},
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

// TestConfigDefaults checks WithDefaults on the settings whose zero selects
// a default and whose negative value turns a feature off.
func TestConfigDefaults(t *testing.T) {
	d := DefaultConfig()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want func(Config) bool
	}{
		{"profile factors by default", func(c *Config) { c.SpectralProfile = 0 }, func(c Config) bool { return c.SpectralProfile == d.SpectralProfile && c.SpectralProfile > 0 }},
		{"profile factors off", func(c *Config) { c.SpectralProfile = -1 }, func(c Config) bool { return c.SpectralProfile < 0 }},
		{"profile threshold kept", func(c *Config) { c.SpectralProfile = 3 }, func(c Config) bool { return c.SpectralProfile == 3 }},
		{"profile half-life by default", func(c *Config) { c.SpectralProfileDays = 0 }, func(c Config) bool { return c.SpectralProfileDays == DefaultSpectralProfileDays }},
		{"profile half-life off", func(c *Config) { c.SpectralProfileDays = -1 }, func(c Config) bool { return c.SpectralProfileDays < 0 }},
		{"factor half-life by default", func(c *Config) { c.SpectralHalfLifeDays = 0 }, func(c Config) bool { return c.SpectralHalfLifeDays == DefaultSpectralHalfLifeDays }},
		{"factor half-life kept", func(c *Config) { c.SpectralHalfLifeDays = 14 }, func(c Config) bool { return c.SpectralHalfLifeDays == 14 }},
		{"factors without decay", func(c *Config) { c.SpectralHalfLifeDays = -1 }, func(c Config) bool { return c.SpectralHalfLifeDays < 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			tc.edit(&c)
			if got := c.WithDefaults(); !tc.want(got) {
				t.Errorf("WithDefaults() gives %+v", got)
			}
		})
	}
}

// TestCheckpointConfigHalfLife checks that a version's config.json written
// before the spectral half-life existed reads the half-life its factors
// were fitted with, and that one written since reads its own.
func TestCheckpointConfigHalfLife(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       float64
	}{
		{"predates the half-life", `{"model": {"spectral": 128, "spectral_weight": 2}}`, spectralHalfLifeBefore},
		{"its own half-life", `{"model": {"spectral": 128, "spectral_weight": 2, "spectral_half_life_days": 14}}`, 14},
		{"no decay", `{"model": {"spectral": 128, "spectral_weight": 2, "spectral_half_life_days": -1}}`, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileConfig), []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			cc, err := readCheckpointConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.Model.WithDefaults().SpectralHalfLifeDays; got != tc.want {
				t.Errorf("half-life %v, want %v", got, tc.want)
			}
		})
	}
}
