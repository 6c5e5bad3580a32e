// Which Accept headers ask for server-sent events (egress/sse.ts acceptsEventStream): the media
// type itself with q > 0 (RFC 9110 §12.5.1, §12.4.2), never a wildcard.
import { acceptsEventStream } from '../../../gateway/egress/sse';

describe('acceptsEventStream', () => {
  test.each([
    ['text/event-stream', true],
    ['TEXT/Event-Stream', true],
    [' text/event-stream ; charset=utf-8', true],
    ['application/json, text/event-stream;q=0.5', true],
    ['text/event-stream;q=1.0', true],
    ['text/event-stream; Q=0.001', true],
    [undefined, false],
    ['', false],
    ['*/*', false],
    ['text/*', false],
    ['application/json', false],
    ['text/event-stream;q=0', false],
    ['text/event-stream; q=0.000', false],
    ['text/event-stream;q=abc', false],
    ['text/event-streams', false],
    ['application/x-event-stream', false],
  ])('%p → %p', (accept, want) => {
    expect(acceptsEventStream(accept)).toBe(want);
  });
});
