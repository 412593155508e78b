export type * from './types';
export { BusError, type BusErrorHandler } from './errors';
export { createMemoryBus, type MemoryBusOptions } from './memory';
export { connectJetStreamBus, type JetStreamBusOptions, type StreamDrift } from './jetstream';
