"""Installs the `s3ta` library, the `launch` trainers and the `experiments` configs."""

import setuptools

setuptools.setup(
    name='s3ta',
    version='0.1.0',
    description='S3TA attention agents trained with distributed IMPALA (JAX/Flax, Launchpad, Reverb).',
    packages=setuptools.find_packages(include=['s3ta', 's3ta.*', 'launch', 'launch.*',
                                               'experiments']),
    python_requires='>=3.10,<3.11',
    # Exact versions live in requirements.txt; these are the direct dependencies.
    install_requires=[
        'jax==0.5.3', 'jaxlib==0.5.3', 'flax==0.10.6', 'optax==0.2.8', 'rlax==0.1.7',
        'chex==0.1.90', 'numpy==1.26.4', 'absl-py', 'ml-collections', 'tensorflow-cpu==2.8.4',
        'protobuf<3.20', 'dm-reverb==0.7.2', 'dm-launchpad==0.5.2', 'envpool==0.8.4', 'ale-py==0.12.1',
        'gymnasium==1.4.0', 'pillow', 'matplotlib', 'psutil==7.2.2', 'cloudpickle==3.1.2',
        'cma==4.5.0', 'box2d==2.3.10', 'pygame-ce==2.5.8', 'vizdoom==1.3.2',
    ],
    extras_require={
        'test': ['pytest==8.3.3', 'pytest-xdist==3.6.1', 'portpicker==1.6.0'],
        # GPU learner: CUDA 12 jaxlib at the same jax version.
        'gpu': ['jax[cuda12]==0.5.3'],
        # The Vertex AI launch (launch/cluster.py); exact pins of its dependencies in requirements.txt.
        'cluster': ['xmanager==0.3.0', 'pytz'],
    },
)
