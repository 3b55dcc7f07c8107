"""What each family's raw output means: OSU output, collectives, the link matrix, OS noise."""
