export * from './gpu-activity-source';
export * from './dcgm-exporter-source';
export * from './nvidia-smi-source';
export * from './nvml-source';
export * from './emulated-source';
export * from './process-cpu-source';
export * from './select-gpu-activity-source';
export * from './gpu-sampler';
