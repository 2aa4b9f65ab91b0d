"""See what happened in a training run: one record per episode, next to verl's rollout dump, and
a static HTML viewer of them (`python -m astra_verl.inspect RUN_DIR`).

    records  the episode record (`EpisodeRecord`), built from what the rollout and the reward left
             in TransferQueue, and the files it is written to (`<rollout_data_dir>/episodes/<step>.jsonl`)
    html     the trajectory pages (one section per episode) and the training summary page
    cli      the command line
"""
