#!/usr/bin/env python3
"""The bare pynvml script issue 29 compares `gpuctl list --query` with: the five fields
index, name, temperature.gpu, utilization.gpu and memory.used of every GPU, as a script
written straight against NVIDIA's binding would read them (one handle per GPU, then one call
per fact; the index is the loop's). Run on Debian's /usr/bin/python3 (python3-pynvml, contrib)
inside `nvsim exec`; bench/nvml_calls.py counts its NVML calls.

    /usr/bin/python3 bench/pynvml_five.py     prints one CSV row per GPU"""
import pynvml

pynvml.nvmlInit()
try:
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        name = pynvml.nvmlDeviceGetName(h)
        if isinstance(name, bytes):  # bindings before 11.5 give bytes
            name = name.decode()
        temp = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
        util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        used = pynvml.nvmlDeviceGetMemoryInfo(h).used // (1024 * 1024)
        print(f"{i}, {name}, {temp}, {util} %, {used} MiB")
finally:
    pynvml.nvmlShutdown()
