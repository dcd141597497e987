// One way out of a session: the subscriber that every transport (a StreamStates call, a Drive
// controller, a WebSocket viewer, a recorder) receives frames through.
//
// The session offers each frame under its lock, on the thread that steps it; offering only
// moves pointers and merges events, so a subscriber costs the tick almost nothing. The
// transport is told that a delivery waits (SubscriberTransport::OnReady) after the session's
// lock is released, and takes it when it can send: it encodes and writes outside the
// session's lock, off the tick's critical path.
//
// Two kinds:
// - kLatest (streams, controllers, viewers): a one-frame mailbox, newest frame wins. A frame
//   replaced before the transport took it is counted as skipped (a reader too slow), unless
//   the rate limit held it back (then it was decimated, as asked). Its contact
//   transitions are kept for the next delivery (the kOngoing events give way to the newer
//   frame's). A slow reader holds at most one frame and never slows the clock.
// - kLossless (recorders): a bounded queue of every frame the decimation takes. When it is
//   full, frames are lost, never silently: the next delivery says exactly which ticks were
//   lost, and how many frames. The clock is never blocked.
#ifndef PITLANE_SERVER_SESSION_SUBSCRIBER_H_
#define PITLANE_SERVER_SESSION_SUBSCRIBER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/session/clock.h"
#include "server/session/frame.h"

namespace pitlane::session {

// What a transport receives.
struct Delivery {
  std::shared_ptr<const Frame> frame;
  // Contact events since the previous delivery (see FrameEvents), filtered by the
  // subscriber's vehicles.
  FrameEvents events;
  // kLatest: frames replaced unread since the previous delivery (not counting those the rate
  // limit decimated): with the deliveries, every frame offered is accounted for.
  std::uint64_t skipped_frames = 0;
  // kLossless: frames lost just before this one because the queue was full: their ticks are
  // [lost_first_tick, lost_last_tick] (ticks the decimation does not take were never
  // offered). Their contact transitions are in `events`.
  std::uint64_t lost_frames = 0;
  std::uint64_t lost_first_tick = 0;
  std::uint64_t lost_last_tick = 0;
  // The first frame of a subscription, or of the session after a reset: its events describe
  // what is in effect, as for a new subscriber (kLatest: nothing from before is left).
  bool first_frame = false;
};

// The transport side of a subscriber: a gRPC stream, a WebSocket, a file writer.
class SubscriberTransport {
 public:
  virtual ~SubscriberTransport() = default;
  // A delivery waits: call Subscriber::Take. Called without the session's lock, on the
  // thread that stepped the session (or the caller of Subscribe); should return soon.
  virtual void OnReady() = 0;
  // The session closed or dropped this subscriber; no more frames will come. OK when a
  // client deleted the session, Unavailable when the server shuts down, NotFound when a
  // controller's vehicle is gone.
  virtual void OnClosed(const absl::Status& reason) = 0;
};

struct SubscriberOptions {
  enum class Kind { kLatest, kLossless };
  Kind kind = Kind::kLatest;
  // Frames of ticks that are a multiple of this (>= 1) are offered.
  std::uint32_t every_n_ticks = 1;
  // Frames of other ticks than the multiples of this may come lean (Frame::lean: poses, speeds
  // and crashed flags only), which cost the session a fifth of a full frame; 1: always full;
  // 0: any may be lean. The frame offered on subscribing, after a reset or a seek is full (but
  // when a full queue loses it, the next frame, which may be lean, comes as the first).
  std::uint32_t full_every_n_ticks = 1;
  // kLatest: at most this many deliveries per wall-clock second; unset = no limit. A frame
  // that arrives too early waits in the mailbox (and may be replaced). The transport is told
  // by the first frame offered after its slot: a frame held back when the session stops
  // ticking (lockstep, paused, barrier) waits for the next tick, or for a transport that asks
  // again (Take) on its own timer.
  std::optional<double> max_rate_hz;
  // Events only of contacts involving these vehicles, and track events only of them and of
  // the race as a whole (sorted, unique); empty = all.
  std::vector<sim::VehicleId> vehicle_ids;
  // kLossless: frames the queue holds, >= 1.
  std::size_t queue_capacity = 64;
  // kLossless: most bytes of frames (FrameBytes, and their events) the queue holds; 0: no
  // limit but the count. A frame is queued into an empty queue whatever its size, and so is a
  // reset's first frame.
  std::size_t queue_bytes = 0;
};

// Thread-safe. The session calls Offer and Accumulate; the transport calls Take.
class Subscriber {
 public:
  // `clock` (for max_rate_hz) must outlive the subscriber.
  Subscriber(SubscriberOptions options, std::shared_ptr<SubscriberTransport> transport,
             const Clock* clock);

  const SubscriberOptions& options() const { return options_; }
  SubscriberTransport& transport() const { return *transport_; }

  // The next delivery, or nullopt if none is due now (nothing new, or the rate limit holds
  // it back): OnReady comes with the next frame that can be taken. A transport calls it
  // when it can send, and again each time it has sent.
  std::optional<Delivery> Take();
  // kLossless, once no more frames are offered (unsubscribed, or the session closed) and Take
  // has emptied the queue: the frames lost after the last one queued, as a Delivery without a
  // frame (lost_* set, and their events), if any were.
  std::optional<Delivery> TakeLost();

  // Session side, under its lock. The contact transitions (kBegan, kEnded) and the track
  // events of a tick; kept until the next delivery.
  void Accumulate(absl::Span<const sim::ContactEvent> transitions,
                  absl::Span<const TrackEvent> track_events = {},
                  bool over_contact_budget = false);
  // Whether this subscriber takes the frame of `tick` (decimation).
  bool Wants(std::uint64_t tick) const { return tick % options_.every_n_ticks == 0; }
  // Whether a lean frame of `tick` will do.
  bool TakesLean(std::uint64_t tick) const {
    return options_.full_every_n_ticks == 0 || tick % options_.full_every_n_ticks != 0;
  }
  // Offers a frame it Wants, with the transitions accumulated since the last offer plus the
  // kOngoing events of its contacts. Returns whether the transport must be told (OnReady).
  bool Offer(std::shared_ptr<const Frame> frame);
  // Replaces everything waiting with `frame` as a first frame: contacts that began at its tick
  // as kBegan, the others kOngoing (a new subscriber, or after a reset). Returns as Offer.
  bool OfferFirst(std::shared_ptr<const Frame> frame);

 private:
  bool OfferLocked(std::shared_ptr<const Frame> frame, FrameEvents events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool max_rate_hz_set() const { return options_.max_rate_hz.has_value(); }
  void Filter(FrameEvents& events) const;
  // Whether the track event is for this subscriber (its vehicles, or the race's own).
  bool Follows(const TrackEvent& event) const;

  const SubscriberOptions options_;
  const std::shared_ptr<SubscriberTransport> transport_;
  const Clock* const clock_;

  absl::Mutex mu_;
  FrameEvents accumulated_ ABSL_GUARDED_BY(mu_);  // Transitions since the last offer.
  // kLatest: the mailbox.
  std::shared_ptr<const Frame> pending_ ABSL_GUARDED_BY(mu_);
  bool pending_deliverable_ ABSL_GUARDED_BY(mu_) = false;  // Past the rate limit's slot.
  FrameEvents pending_events_ ABSL_GUARDED_BY(mu_);
  std::uint64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether the transport asked and found nothing due (so the next offer must wake it).
  bool waiting_ ABSL_GUARDED_BY(mu_) = true;
  // Rate limit: the next delivery may not be taken before this time (clock_'s).
  std::int64_t not_before_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool first_pending_ ABSL_GUARDED_BY(mu_) = false;  // The next delivery is a first frame.
  // kLossless: the queue, and frames lost since the last queued one.
  std::deque<Delivery> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<std::size_t> queue_frame_bytes_ ABSL_GUARDED_BY(mu_);  // Of queue_'s frames.
  std::size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t lost_first_tick_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t lost_last_tick_ ABSL_GUARDED_BY(mu_) = 0;
  FrameEvents lost_events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SUBSCRIBER_H_
