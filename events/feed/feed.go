package feed

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/corralhq/corral/events"
)

// Consumer applies committed events.
type Consumer interface {
	// Name identifies the consumer (its topic and its handler).
	Name() string
	// Position is the last position the consumer applied, durably.
	Position(ctx context.Context) (int64, error)
	// Apply applies events that follow Position without a gap.
	Apply(ctx context.Context, evs []events.Event) error
}

// Poisoned is a batch a consumer could not apply.
type Poisoned struct {
	Consumer string
	From, To int64
	Reason   string
}

// Options tune a Feed.
type Options struct {
	Retries         int           // default 5
	InitialInterval time.Duration // between retries, doubling; default 50 ms
	Logger          *slog.Logger
}

// Feed runs the router.
type Feed struct {
	store     events.Tailer
	consumers []Consumer
	opts      Options
	pubsub    *gochannel.GoChannel
	router    *message.Router

	mu       sync.Mutex
	cache    map[string][]events.Event // message id -> its events, while in flight
	applied  map[string]int64
	halted   map[string]bool
	poisoned []Poisoned
}

const poisonTopic = "corral.poison"

// New builds a feed of the events store reads and tails to the consumers.
func New(store events.Tailer, opts Options, consumers ...Consumer) (*Feed, error) {
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	if opts.InitialInterval <= 0 {
		opts.InitialInterval = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// The router's own records of handlers starting and stopping are
	// detail: debug, not info.
	logger := watermill.NewSlogLoggerWithLevelMapping(opts.Logger.With("component", "feed"),
		map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
	f := &Feed{store: store, consumers: consumers, opts: opts,
		cache: map[string][]events.Event{}, applied: map[string]int64{}, halted: map[string]bool{}}
	f.pubsub = gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, logger)
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, logger)
	if err != nil {
		return nil, err
	}
	poison, err := middleware.PoisonQueue(f.pubsub, poisonTopic)
	if err != nil {
		return nil, err
	}
	// Outermost first: the poison queue sees an error only once the retries
	// are spent; a panic becomes an error the retries see.
	r.AddMiddleware(
		middleware.CorrelationID,
		poison,
		middleware.Retry{MaxRetries: opts.Retries, InitialInterval: opts.InitialInterval, Multiplier: 2, MaxInterval: 2 * time.Second, Logger: logger}.Middleware,
		middleware.Recoverer,
	)
	seen := map[string]bool{}
	for _, c := range consumers {
		if seen[c.Name()] {
			return nil, fmt.Errorf("feed: consumer %q: name used twice", c.Name())
		}
		seen[c.Name()] = true
		r.AddConsumerHandler(c.Name(), topic(c), f.pubsub, f.handler(c))
	}
	r.AddConsumerHandler("poison", poisonTopic, f.pubsub, f.recordPoison)
	f.router = r
	return f, nil
}

func topic(c Consumer) string { return "corral.events." + c.Name() }

// Run delivers events until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	routerDone := make(chan error, 1)
	go func() { routerDone <- f.router.Run(rctx) }()
	select {
	case <-f.router.Running():
	case err := <-routerDone:
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(f.consumers))
	for _, c := range f.consumers {
		wg.Add(1)
		go func(c Consumer) {
			defer wg.Done()
			// publish returns only on an error: the end of rctx or a failure.
			if err := f.publish(rctx, c); rctx.Err() == nil {
				errs <- fmt.Errorf("feed: consumer %s: %w", c.Name(), err)
				cancel()
			}
		}(c)
	}
	wg.Wait()
	cancel()
	err := <-routerDone
	select {
	case e := <-errs:
		return e
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// publish tails the log for one consumer.
func (f *Feed) publish(ctx context.Context, c Consumer) error {
	pos, err := c.Position(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.applied[c.Name()] = pos
	f.mu.Unlock()
	sub := f.store.Subscribe(pos)
	for {
		evs, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		from, to := evs[0].Position, evs[len(evs)-1].Position
		id := c.Name() + ":" + strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(to, 10)
		msg := message.NewMessage(id, nil)
		msg.Metadata.Set("consumer", c.Name())
		msg.Metadata.Set("from", strconv.FormatInt(from, 10))
		msg.Metadata.Set("to", strconv.FormatInt(to, 10))
		middleware.SetCorrelationID(evs[0].CorrelationID, msg)
		f.mu.Lock()
		f.cache[id] = evs
		f.mu.Unlock()
		err = f.pubsub.Publish(topic(c), msg)
		f.mu.Lock()
		delete(f.cache, id)
		f.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (f *Feed) handler(c Consumer) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		to, err := strconv.ParseInt(msg.Metadata.Get("to"), 10, 64)
		if err != nil {
			return fmt.Errorf("message %s: bad range: %w", msg.UUID, err)
		}
		f.mu.Lock()
		applied, halted := f.applied[c.Name()], f.halted[c.Name()]
		evs := f.cache[msg.UUID]
		f.mu.Unlock()
		if halted || to <= applied {
			return nil // halted by a poisoned batch, or applied already
		}
		if evs == nil || evs[0].Position > applied+1 {
			// Not cached (a redelivery after the publisher moved on): read
			// exactly what is missing.
			var err error
			evs, err = f.store.Read(msg.Context(), applied+1, int(to-applied))
			if err != nil {
				return err
			}
		}
		for len(evs) > 0 && evs[0].Position <= applied {
			evs = evs[1:]
		}
		if len(evs) == 0 {
			return nil
		}
		if evs[0].Position != applied+1 {
			return fmt.Errorf("consumer %s applied %d, batch starts at %d", c.Name(), applied, evs[0].Position)
		}
		if err := c.Apply(msg.Context(), evs); err != nil {
			return err
		}
		f.mu.Lock()
		f.applied[c.Name()] = evs[len(evs)-1].Position
		f.mu.Unlock()
		return nil
	}
}

func (f *Feed) recordPoison(msg *message.Message) error {
	from, _ := strconv.ParseInt(msg.Metadata.Get("from"), 10, 64)
	to, _ := strconv.ParseInt(msg.Metadata.Get("to"), 10, 64)
	p := Poisoned{Consumer: msg.Metadata.Get("consumer"), From: from, To: to, Reason: msg.Metadata.Get(middleware.ReasonForPoisonedKey)}
	f.mu.Lock()
	f.poisoned = append(f.poisoned, p)
	f.halted[p.Consumer] = true
	f.mu.Unlock()
	f.opts.Logger.Error("consumer halted on a poisoned batch", "consumer", p.Consumer, "from", from, "to", to, "reason", p.Reason)
	return nil
}

// Poisoned lists the batches that halted their consumers.
func (f *Feed) Poisoned() []Poisoned {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Poisoned(nil), f.poisoned...)
}
