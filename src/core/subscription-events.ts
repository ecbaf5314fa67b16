/** A subscription was created, changed or deleted (after the change is durable). */
export interface SubscriptionEvent {
  type: 'created' | 'updated' | 'deleted';
  /** Full name (`projects/P/subscriptions/S`). */
  subscription: string;
}

export type SubscriptionListener = (event: SubscriptionEvent) => void;

/**
 * The core announces subscription lifecycle changes here, so what acts on subscriptions (the export
 * manager) follows the core instead of every API path telling it. A listener that throws is reported,
 * never allowed to undo the change or stop the other listeners.
 */
export class SubscriptionEvents {
  private readonly listeners = new Set<SubscriptionListener>();

  constructor(private readonly onListenerError: (error: unknown) => void) {}

  /** Returns the function that removes the listener. */
  on(listener: SubscriptionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: SubscriptionEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (e) {
        this.onListenerError(e);
      }
    }
  }
}
