"""The group coordinator: consumer-group state, offsets in __consumer_offsets."""
