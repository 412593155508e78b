import type { Codec } from '@rrs/idempotency';

/** An answer as an Idempotency-Key record saves it: the response without `idempotentReplayed`. */
export type SavedAnswer<Response> = Omit<Response, 'idempotentReplayed'>;

/**
 * How an answer is saved and read back: encoded as its gRPC response message (so a replay is exactly
 * the first answer), with `idempotentReplayed` left out and set by whoever answers.
 */
export function savedAnswerCodec<Response extends { idempotentReplayed: boolean }>(message: {
  encode(response: Response): { finish(): Uint8Array };
  decode(bytes: Uint8Array): Response;
}): Codec<SavedAnswer<Response>> {
  return {
    encode: (answer) => message.encode({ ...answer, idempotentReplayed: false } as Response).finish(),
    decode: (bytes) => {
      const { idempotentReplayed: _setByCaller, ...answer } = message.decode(bytes);
      return answer;
    },
  };
}
