/** A change seen by a watch. `replay` is true for the current state delivered first. */
export type WatchEvent<T> =
  | {
      readonly type: "put";
      readonly key: string;
      readonly value: T;
      readonly revision: number;
      readonly replay: boolean;
    }
  | { readonly type: "delete"; readonly key: string; readonly revision: number; readonly replay: boolean };

/** A running watch. */
export interface Watch {
  /** Resolves once the state that existed when the watch started has been delivered. */
  readonly ready: Promise<void>;
  stop(): Promise<void>;
}
