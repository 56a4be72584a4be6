"""Imported first by kfdist's own modules that load TensorFlow: this process uses tf-keras.

    from kfdist.components.common import legacy_keras  # noqa: F401  (before TensorFlow)
    import tensorflow as tf

It sets kfdist's own variables (`own_env.OWN_ENV`) unless already set; a
user's program that kfdist starts gets none of them (`own_env.user_environ`).
Never import it from code a user's program runs (`kfdist.program` and what
it reads with): the program chooses its own Keras.
"""

from kfdist.components.common import own_env

own_env.use_own_env()
