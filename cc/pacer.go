package cc

import (
	"math"
	"time"
)

// unitsPerByte is the pacer's fixed point: a token is one bit-nanosecond
// per second, so that rate (bits/s) × elapsed (ns) adds tokens exactly, with
// no rounding to drift over millions of packets.
const unitsPerByte = 8 * int64(time.Second)

// MaxPacerBurst is the largest burst a Pacer holds, which keeps its
// arithmetic inside int64.
const MaxPacerBurst = 64 << 20

// Never is the delay Pacer.Delay returns when the rate is zero.
const Never = time.Duration(math.MaxInt64)

// Pacer is a byte-granular token bucket for one QP: it lets bytes go at
// Rate, with bursts up to Burst bytes after idle time. Time is passed in;
// nothing allocates, and it is 48 bytes, so a device can keep one per QP
// for tens of thousands of QPs.
//
// The engine asks Delay before a packet goes: 0 means send it and call
// Take; otherwise arm the timer wheel for now+Delay and ask again then.
// Retransmissions and ACKs go through the same Pacer as first transmissions,
// so a QP never exceeds its rate.
//
// A packet larger than Burst may go once the bucket is full, and leaves it
// in debt, so a burst smaller than the MTU slows the QP but never stalls it.
type Pacer struct {
	rate   Rate
	cap    int64     // burst, in units
	tokens int64     // units; negative when in debt
	last   time.Time // of the last refill; zero before the first
}

// NewPacer returns a pacer at rate with a full bucket of burst bytes
// (capped at MaxPacerBurst). It needs no start time: a full bucket earns
// nothing, so the first call's time is where its clock starts.
func NewPacer(rate Rate, burst int) Pacer {
	burst = min(max(burst, 1), MaxPacerBurst)
	c := int64(burst) * unitsPerByte
	return Pacer{rate: rate, cap: c, tokens: c}
}

// refill adds the tokens earned since last, up to the cap.
func (p *Pacer) refill(now time.Time) {
	dt := int64(now.Sub(p.last))
	if dt <= 0 {
		return
	}
	p.last = now
	room := p.cap - p.tokens
	if p.rate == 0 || room <= 0 {
		return
	}
	r := int64(p.rate)
	if dt >= room/r+1 {
		p.tokens = p.cap
		return
	}
	p.tokens += r * dt
	p.tokens = min(p.tokens, p.cap)
}

// Rate returns the pacing rate.
func (p *Pacer) Rate() Rate { return p.rate }

// SetRate changes the rate from now on; tokens earned before now are kept
// at the old rate.
func (p *Pacer) SetRate(now time.Time, r Rate) {
	if r == p.rate {
		return
	}
	p.refill(now)
	p.rate = r
}

// Delay returns how long from now until n bytes may go: 0 if they may go
// now, Never if the rate is 0.
func (p *Pacer) Delay(now time.Time, n int) time.Duration {
	p.refill(now)
	need := min(int64(n)*unitsPerByte, p.cap)
	deficit := need - p.tokens
	if deficit <= 0 {
		return 0
	}
	if p.rate == 0 {
		return Never
	}
	r := int64(p.rate)
	return time.Duration((deficit + r - 1) / r)
}

// Take spends n bytes at now. Call it when the bytes go, after Delay said 0.
func (p *Pacer) Take(now time.Time, n int) {
	p.refill(now)
	p.tokens -= int64(n) * unitsPerByte
	// Bound the debt so a huge n cannot overflow; such a QP waits at
	// most the time to earn 2·MaxPacerBurst.
	p.tokens = max(p.tokens, -2*MaxPacerBurst*unitsPerByte)
}

// Tokens returns the bytes the bucket holds at now (negative in debt).
func (p *Pacer) Tokens(now time.Time) int64 {
	p.refill(now)
	return p.tokens / unitsPerByte
}
