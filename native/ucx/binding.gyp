{
  "variables": {
    "have_ucx%": "<!(sh scripts/ucx-config.sh have)"
  },
  # -fvisibility=hidden: the addon's classes span several files in a named namespace; only the N-API
  # entry points (exported by node-addon-api's own attribute) leave ucx.node.
  "target_defaults": {
    "cflags_cc": ["-std=c++17", "-fexceptions", "-O2", "-Wall", "-Wno-unused-parameter", "-fvisibility=hidden"],
    "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
    # The CUDA driver and NVML are opened at run time (cuda_driver.cc, nvml.cc): nothing of CUDA at build time.
    "libraries": ["-ldl"]
  },
  "targets": [
    {
      "target_name": "ucx",
      "conditions": [
        ["have_ucx==1", {
          "sources": [
            "src/module.cc", "src/worker.cc", "src/worker_progress.cc", "src/worker_connect.cc", "src/worker_memory.cc",
            "src/worker_tags.cc", "src/endpoint.cc", "src/mapping.cc", "src/remote_key.cc",
            "src/listener.cc", "src/operation.cc", "src/context.cc", "src/errors.cc",
            "src/cuda_driver.cc", "src/cuda_js.cc", "src/nvml.cc"
          ],
          "include_dirs": ["<!@(sh scripts/ucx-config.sh cflags)"],
          "libraries": ["<!@(sh scripts/ucx-config.sh libs)", "<!@(sh scripts/ucx-config.sh libdirs)"]
        }, {
          "sources": ["src/stub.cc", "src/cuda_driver.cc", "src/cuda_js.cc", "src/nvml.cc"],
          "defines": ["UCX_STUB_REASON=\"UCX unavailable\""]
        }]
      ]
    },
    {
      "target_name": "ucx_stub",
      "sources": ["src/stub.cc", "src/cuda_driver.cc", "src/cuda_js.cc", "src/nvml.cc"],
      "defines": ["UCX_STUB_REASON=\"UCX unavailable (stub build)\""]
    }
  ]
}
