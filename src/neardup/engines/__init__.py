"""Engines: where a run's calls run and how rows move between them. Nothing else.

An engine is a context manager (started for a run, stopped after it) with:

    cpus                          the CPUs it schedules on
    partitions(nbytes) -> int     how many partitions it wants for a shuffle of ``nbytes``
    map(fn, items, progress=, units=) -> frame
                                  ``fn(item)`` for every item: a list, or the partitions of a
                                  frame; in order. A NeardupError of a call is raised by
                                  ``collect`` (the first in item order).
    shuffle(frames, key, parts) -> frame
                                  the rows of the tables of ``frames`` regrouped on the hash of
                                  the integer column ``key``: one call of a later ``map`` gets
                                  exactly the rows of one partition, with a column ``part``
    collect(frame) -> list        the results, in order, in the driver
    persist(frame) -> frame       computed once (a frame used twice is not computed twice)
    share(value) -> handle        a large value for every call: ``handle.get()``

:mod:`.local` runs every call in this process; :mod:`.ray` runs them as Ray tasks with Ray
Data's shuffle. The stages (:mod:`neardup.stages`) say what is computed; an engine holds no
stage logic, no kernel and no file format.
"""
