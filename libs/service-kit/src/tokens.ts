/** DI tokens of what every service shell gets from the core module. */
export const MESSAGE_BUS = Symbol('MESSAGE_BUS');
export const EVENT_STORE = Symbol('EVENT_STORE');
export const SERVICE_CONFIG = Symbol('SERVICE_CONFIG');
/** `() => epoch ms`: the wall clock, or the main job's scaled clock (emulated cluster in scaled time). */
export const CLOCK = Symbol('CLOCK');
/** The process's prom-client `Registry`, served at `/metrics`; services register their own metrics in it. */
export const METRICS_REGISTRY = Symbol('METRICS_REGISTRY');
