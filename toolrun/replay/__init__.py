"""Record a run's model exchanges and play them back offline.

``recording``: the cassette file and the recording / replay transports; ``divergence``:
where a replayed request departs from the recorded one, in plain words; ``playback``: which
of live, recorded or replayed a recipe run uses.
"""
