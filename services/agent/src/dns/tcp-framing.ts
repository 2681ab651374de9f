/**
 * DNS over TCP (RFC 1035 4.2.2, RFC 7766): each message is preceded by its
 * length in two bytes, and a connection may carry several. TCP delivers
 * bytes, not messages, so a message may arrive in pieces or several at
 * once; the framer collects them. (dns-packet's streamDecode reads one
 * complete frame; it does not buffer.)
 */
export class TcpFramer {
  #pending: Buffer = Buffer.alloc(0);

  /** The message with its length prefix. */
  static frame(message: Buffer): Buffer {
    const prefix = Buffer.alloc(2);
    prefix.writeUInt16BE(message.length);
    return Buffer.concat([prefix, message]);
  }

  /** Adds received bytes; returns the messages now complete, in order. */
  push(chunk: Buffer): Buffer[] {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const messages: Buffer[] = [];
    while (this.#pending.length >= 2) {
      const length = this.#pending.readUInt16BE(0);
      if (this.#pending.length < 2 + length) break;
      messages.push(this.#pending.subarray(2, 2 + length));
      this.#pending = this.#pending.subarray(2 + length);
    }
    return messages;
  }
}
