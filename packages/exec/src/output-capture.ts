/**
 * Collects one output stream: keeps the first `limit` bytes (and a few more, to find a character
 * boundary), a rolling tail of the last `tailBytes`, and the total written. Memory stays bounded
 * however much the program writes.
 */
export class OutputCapture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private tail: Buffer = Buffer.alloc(0);
  /** Bytes written in all. */
  total = 0;

  constructor(
    private readonly limit: number,
    private readonly tailBytes: number,
  ) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    // Up to 3 bytes past the limit reveal whether the cut falls inside a UTF-8 sequence.
    const room = this.limit + 3 - this.kept;
    if (room > 0) {
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(part);
      this.kept += part.length;
    }
    if (this.tailBytes > 0) {
      const joined = chunk.length >= this.tailBytes ? chunk : Buffer.concat([this.tail, chunk]);
      this.tail = joined.subarray(Math.max(0, joined.length - this.tailBytes));
    }
  }

  get truncated(): boolean {
    return this.total > this.limit;
  }

  /** The kept text, cut before any character the limit would split. */
  text(): string {
    const head = Buffer.concat(this.chunks);
    if (head.length <= this.limit) return head.toString('utf8');
    return head.subarray(0, utf8Boundary(head, this.limit)).toString('utf8');
  }

  /** The last bytes written, starting at a character boundary. */
  tailText(): string {
    let start = 0;
    while (start < this.tail.length && start < 3 && isContinuation(this.tail[start]!)) start += 1;
    return this.tail.subarray(start).toString('utf8');
  }
}

/** The largest cut at or before `limit` that does not fall inside a UTF-8 sequence. */
function utf8Boundary(bytes: Buffer, limit: number): number {
  let cut = limit;
  // The byte at `cut` is the first one dropped; while it continues a sequence, move the cut back to
  // the sequence's lead byte (at most 3 steps: sequences are at most 4 bytes).
  while (cut > 0 && limit - cut < 3 && isContinuation(bytes[cut]!)) cut -= 1;
  return cut;
}

function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}
