// When the gateway warns at start-up that a Unix socket backend's send buffer will be smaller than
// the compiled lane asks for (gateway/ingress/http1/lane.ts unixSendBufferShortfall): the process
// cannot force it (no CAP_NET_ADMIN in /proc/self/status's CapEff) and net.core.wmem_max caps it.
import { UNIX_SEND_BUFFER, unixSendBufferShortfall } from '../../../../gateway/ingress/http1/lane';

const status = (capEff: string): string => `Name:\tnode\nCapInh:\t0000000000000000\nCapPrm:\t${capEff}\nCapEff:\t${capEff}\nCapBnd:\t000001ffffffffff\n`;
const files = (capEff: string | undefined, wmemMax: string | undefined) => (file: string): string | undefined =>
  file === '/proc/self/status' ? (capEff === undefined ? undefined : status(capEff)) : file === '/proc/sys/net/core/wmem_max' ? wmemMax : undefined;

describe('a Unix socket backend\'s send buffer', () => {
  test('unprivileged, wmem_max at the kernel\'s default: short, with the cap', () => {
    expect(unixSendBufferShortfall(files('0000000000000000', '212992\n'))).toEqual({ wmemMax: 212992 });
    // Every capability but CAP_NET_ADMIN (bit 12) is no help.
    expect(unixSendBufferShortfall(files('000001ffffffefff', '212992\n'))).toEqual({ wmemMax: 212992 });
  });

  test('CAP_NET_ADMIN (root\'s usual set, or that one alone): SO_SNDBUFFORCE passes the cap, nothing said', () => {
    expect(unixSendBufferShortfall(files('000001ffffffffff', '212992\n'))).toBeUndefined();
    expect(unixSendBufferShortfall(files('0000000000001000', '212992\n'))).toBeUndefined();
  });

  test('wmem_max at or above what the lane asks for: nothing said', () => {
    expect(unixSendBufferShortfall(files('0000000000000000', `${UNIX_SEND_BUFFER}\n`))).toBeUndefined();
    expect(unixSendBufferShortfall(files('0000000000000000', '16777216'))).toBeUndefined();
  });

  test('off Linux, or a /proc it cannot read or parse: nothing said', () => {
    expect(unixSendBufferShortfall(files(undefined, '212992'))).toBeUndefined();
    expect(unixSendBufferShortfall(files('0000000000000000', undefined))).toBeUndefined();
    expect(unixSendBufferShortfall(files('0000000000000000', 'many'))).toBeUndefined();
    expect(unixSendBufferShortfall(() => 'CapEff: zz\n')).toBeUndefined();
  });
});
