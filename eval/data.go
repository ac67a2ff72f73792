package eval

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/hir-ads/hir/graph"
)

// Errors returned by the harness.
var (
	// ErrNoData is returned when a data set holds no user -> ad engagement.
	ErrNoData = errors.New("no user-ad engagement events")
	// ErrNoQueries is returned when the test window yields no query.
	ErrNoQueries = errors.New("no evaluation queries")
	// ErrBadConfig is returned for an invalid [Config] or method option.
	ErrBadConfig = errors.New("bad eval config")
	// ErrUnknownMethod is returned for a method name [NewMethod] does not know.
	ErrUnknownMethod = errors.New("unknown method")
)

// Interaction is one engagement event from a user to an item (an ad), in the
// dense ids of a [Catalog].
type Interaction struct {
	User int32
	Item int32
	TS   int64 // unix ms
	Type graph.EdgeType
}

// Positive reports whether the interaction is a click or deeper.
func (in Interaction) Positive() bool { return in.Type.IsPositive() }

// Catalog is what a method may know without looking at any event: the users
// and items (ads) with dense ids, and their content. It is immutable once
// built and safe for concurrent use.
type Catalog struct {
	Users    []string // external user ids; index = dense user id
	Items    []string // external ad ids; index = dense item id
	ItemText []string // ad text, by dense item id
	// Entities maps every entity by reference (all types), for content
	// lookups such as the text of an ad's category or brand.
	Entities map[graph.Ref]*graph.Entity

	userIdx map[string]int32
	itemIdx map[string]int32
}

// NumUsers returns the number of users.
func (c *Catalog) NumUsers() int { return len(c.Users) }

// NumItems returns the number of items.
func (c *Catalog) NumItems() int { return len(c.Items) }

// User returns the dense id of the user with external id id.
func (c *Catalog) User(id string) (int32, bool) { u, ok := c.userIdx[id]; return u, ok }

// Item returns the dense id of the ad with external id id.
func (c *Catalog) Item(id string) (int32, bool) { i, ok := c.itemIdx[id]; return i, ok }

// Data is a loaded data set: a catalog plus its events in time order.
type Data struct {
	Catalog *Catalog
	// Interactions are the user -> ad engagement events sorted by time (stable
	// in input order for equal times).
	Interactions []Interaction
	// Structure are the structural events (ad -> campaign, ad -> category,
	// ...) and any engagement not from a user to an ad, sorted by time.
	Structure []graph.Event
}

// Collector gathers entities and events into a [Data]. It implements the
// dataset.Sink contract (Entity and Event methods) and copies what it is
// given. Events repeating a non-empty idempotency id are kept once. Not safe
// for concurrent use.
type Collector struct {
	entities []graph.Entity
	events   []graph.Event
	seen     map[string]bool
}

// Entity records a copy of e.
func (c *Collector) Entity(e *graph.Entity) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("collect entity: %w", err)
	}
	c.entities = append(c.entities, *e)
	return nil
}

// Event records a copy of ev.
func (c *Collector) Event(ev *graph.Event) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("collect event: %w", err)
	}
	if ev.ID != "" {
		if c.seen == nil {
			c.seen = make(map[string]bool)
		}
		if c.seen[ev.ID] {
			return nil
		}
		c.seen[ev.ID] = true
	}
	c.events = append(c.events, *ev)
	return nil
}

// Data builds the data set from what was collected. Users are the sources
// and items the destinations of user -> ad engagement events, plus every user
// and ad entity (an ad with no event is still a candidate: a cold item).
// Dense ids follow the order of first appearance (entities first).
func (c *Collector) Data() (*Data, error) {
	cat := &Catalog{
		Entities: make(map[graph.Ref]*graph.Entity, len(c.entities)),
		userIdx:  make(map[string]int32),
		itemIdx:  make(map[string]int32),
	}
	addUser := func(id string) int32 {
		u, ok := cat.userIdx[id]
		if !ok {
			u = int32(len(cat.Users))
			cat.userIdx[id] = u
			cat.Users = append(cat.Users, id)
		}
		return u
	}
	addItem := func(id string) int32 {
		i, ok := cat.itemIdx[id]
		if !ok {
			i = int32(len(cat.Items))
			cat.itemIdx[id] = i
			cat.Items = append(cat.Items, id)
			cat.ItemText = append(cat.ItemText, "")
		}
		return i
	}
	for k := range c.entities {
		e := &c.entities[k]
		cat.Entities[e.Ref()] = e
		switch e.Type {
		case graph.NodeUser:
			addUser(e.ID)
		case graph.NodeAd:
			cat.ItemText[addItem(e.ID)] = e.Text
		}
	}
	d := &Data{Catalog: cat}
	for _, ev := range c.events {
		if ev.Src.Type == graph.NodeUser && ev.Dst.Type == graph.NodeAd && !ev.Type.IsStructure() {
			d.Interactions = append(d.Interactions, Interaction{
				User: addUser(ev.Src.ID), Item: addItem(ev.Dst.ID), TS: ev.TS, Type: ev.Type,
			})
			continue
		}
		d.Structure = append(d.Structure, ev)
	}
	if len(d.Interactions) == 0 {
		return nil, ErrNoData
	}
	slices.SortStableFunc(d.Interactions, func(a, b Interaction) int { return cmp.Compare(a.TS, b.TS) })
	slices.SortStableFunc(d.Structure, func(a, b graph.Event) int { return cmp.Compare(a.TS, b.TS) })
	return d, nil
}
