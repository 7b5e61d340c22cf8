import dgram from 'node:dgram';
import { questionName } from './black-hole-dns.js';

/** A DNS server on loopback that answers every query with no records and the response code it is told. */
export interface RcodeDns {
  readonly port: number;
  close(): Promise<void>;
}

/** DNS response codes (RFC 1035 §4.1.1). */
export const RCODE = { SERVFAIL: 2, NXDOMAIN: 3 } as const;

/**
 * Binds UDP 127.0.0.1 on a free port; each query gets a response with `rcodeOf(name)`, its question
 * echoed and no answer records (NOERROR, 0, is a name with no records of that type).
 */
export async function startRcodeDns(rcodeOf: (name: string) => number): Promise<RcodeDns> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (query, from) => {
    const name = questionName(query);
    const end = questionEnd(query);
    if (name === undefined || end === undefined) return;
    const response = Buffer.from(query.subarray(0, end));
    // QR = 1, the query's opcode and RD, RA = 1, then the response code.
    response[2] = 0x80 | (query[2]! & 0x79);
    response[3] = 0x80 | (rcodeOf(name) & 0x0f);
    response.writeUInt16BE(1, 4);
    response.writeUInt16BE(0, 6);
    response.writeUInt16BE(0, 8);
    response.writeUInt16BE(0, 10);
    socket.send(response, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    port: socket.address().port,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** Where the first question ends: its name, then QTYPE and QCLASS (4 bytes). */
function questionEnd(message: Buffer): number | undefined {
  let offset = 12;
  while (offset < message.length) {
    const length = message[offset]!;
    if (length === 0) return offset + 1 + 4 <= message.length ? offset + 1 + 4 : undefined;
    offset += 1 + length;
  }
  return undefined;
}
