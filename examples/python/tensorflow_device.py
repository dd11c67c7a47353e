#!/usr/bin/python3
"""TensorFlow on the GPU gpuctl chooses. TensorFlow takes every GPU it sees (and their memory)
unless told otherwise; the usual fix, CUDA_VISIBLE_DEVICES typed by hand with nvidia-smi's
indices, names the wrong GPU whenever CUDA's order differs from nvidia-smi's.

    python3 examples/python/tensorflow_device.py

gpuctl.use() leases one GPU and sets CUDA_VISIBLE_DEVICES to its UUID (and
CUDA_DEVICE_ORDER=PCI_BUS_ID) before TensorFlow is imported, so /GPU:0 is that GPU.
"""
import gpuctl


def main() -> None:
    lease = gpuctl.use(1, min_free_mem="8GiB", max_util=20, label="tensorflow example")
    import tensorflow as tf  # after gpuctl.use()

    gpus = tf.config.list_physical_devices("GPU")
    assert len(gpus) == 1, gpus
    tf.config.experimental.set_memory_growth(gpus[0], True)
    dev = lease.devices[0]
    print(f"/GPU:0 is GPU {dev.index} ({dev.name}, {dev.uuid})")
    with tf.device("/GPU:0"):
        x = tf.random.normal((2048, 2048))
        print("checksum", float(tf.reduce_sum(tf.matmul(x, x))))


if __name__ == "__main__":
    main()
