from setuptools import Extension, setup

setup(
    name="cext",
    version="0.1",
    packages=["cext"],
    ext_modules=[Extension("cext._speed", ["csrc/speed.c"])],
)
