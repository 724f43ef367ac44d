"""Replay: the Reverb trajectory queue between actors and the learner."""

from s3ta.replay.queue import (ITEM_EXTRA_FIELDS, TABLE_NAME, TrajectoryQueueWriter,
                               batch_to_trajectory, item_spec, make_dataset, make_queue_table,
                               make_queue_tables_fn, split_trajectory, tf_signature, time_major,
                               wait_for_server)
